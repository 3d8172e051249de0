// Host build of the inspect stage's full check (cuda/inspect_eval.cuh; PW_DEVICE = static inline),
// for pipeline/inspect/tests/eval_cuda_host.rs, which holds it equal to pktwarp_inspect::eval.
#include "inspect_eval.cuh"

// The batch as the two kernels compute it: every candidate's match flag, then every verdict.
extern "C" void pw_host_insp_batch(const uint8_t *img, const pw_insp_frame *frames, uint32_t n_frames,
                                   const uint8_t *arena, const uint32_t *cand_off,
                                   const uint32_t *cand_rules, uint8_t *matched,
                                   pw_insp_verdict *verdicts) {
    if (n_frames == 0) return;
    for (uint32_t j = 0; j < cand_off[n_frames]; j++)
        matched[j] = pw_insp_eval_cand(img, frames, n_frames, arena, cand_off, cand_rules, j);
    for (uint32_t i = 0; i < n_frames; i++)
        verdicts[i] = pw_insp_verdict_of(img, cand_off, cand_rules, matched, i);
}

// The image check the GPU probes run before an upload (pw_insp_image_check).
extern "C" int pw_host_insp_image_check(const uint8_t *img, uint64_t len, char *why, uint64_t cap) {
    return pw_insp_image_check(img, len, why, (size_t)cap);
}

// Sizes and field offsets of the records, for the Rust layout test: writes up to cap words,
// returns how many there are.
extern "C" uint32_t pw_host_insp_layout(uint32_t *out, uint32_t cap) {
    const uint32_t v[] = {
        (uint32_t)sizeof(pw_insp_header),
        (uint32_t)sizeof(pw_insp_op),
        (uint32_t)PW_OFFSETOF(pw_insp_op, a),
        (uint32_t)PW_OFFSETOF(pw_insp_op, pat_off),
        (uint32_t)PW_OFFSETOF(pw_insp_op, value),
        (uint32_t)PW_OFFSETOF(pw_insp_op, mask),
        (uint32_t)sizeof(pw_insp_rule),
        (uint32_t)PW_OFFSETOF(pw_insp_rule, action),
        (uint32_t)PW_OFFSETOF(pw_insp_rule, src),
        (uint32_t)PW_OFFSETOF(pw_insp_rule, ops),
        (uint32_t)PW_OFFSETOF(pw_insp_rule, dsize),
        (uint32_t)PW_OFFSETOF(pw_insp_rule, has_flags),
        (uint32_t)PW_OFFSETOF(pw_insp_rule, flow),
        (uint32_t)sizeof(pw_insp_addr),
        (uint32_t)sizeof(pw_insp_port),
        (uint32_t)sizeof(pw_insp_frame),
        (uint32_t)PW_OFFSETOF(pw_insp_frame, data_off),
        (uint32_t)PW_OFFSETOF(pw_insp_frame, ip_proto),
        (uint32_t)PW_OFFSETOF(pw_insp_frame, has_http),
        (uint32_t)PW_OFFSETOF(pw_insp_frame, ct_state),
        (uint32_t)PW_OFFSETOF(pw_insp_frame, ct_dir),
        (uint32_t)PW_OFFSETOF(pw_insp_frame, buf_off),
        (uint32_t)PW_OFFSETOF(pw_insp_frame, buf_len),
        (uint32_t)sizeof(pw_insp_verdict),
    };
    const uint32_t n = (uint32_t)(sizeof(v) / sizeof(v[0]));
    for (uint32_t i = 0; i < n && i < cap; i++) out[i] = v[i];
    return n;
}
