/* The inspect stage's stand-alone kernels (pw_insp_eval_kernel, pw_insp_verdict_kernel), one
 * module for nvcc / NVRTC; scripts/check-kernels.sh compiles it for sm_90. */
#include "inspect_eval.cuh"
