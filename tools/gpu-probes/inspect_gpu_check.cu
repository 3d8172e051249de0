// GPU check of the inspect stage's full check (run by tools/gpu-probes/inspect-gpu-check.sh on a
// machine with a GPU and nvcc): runs gpu-kernels/cuda/inspect_eval.cuh's two kernels on the GPU
// over the batch that `inspect-gpu-check.sh inputs DIR` wrote (the Rust evaluator's outputs
// beside it), compares every candidate's match flag and every verdict, then times the batch.
// Exit 0: all equal; 1: a difference (the first ones printed); 2: an input or CUDA error.
#include "tool_io.cuh"
#include "inspect_eval.cuh"

template <typename T> static T *upload(const std::vector<char> &v) {
    T *d;
    CK(cudaMalloc(&d, v.size() + 8));
    CK(cudaMemcpy(d, v.data(), v.size(), cudaMemcpyHostToDevice));
    return d;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: inspect_gpu_check DIR [REPS=20]\n"); return 2; }
    const std::string dir = argv[1];
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    auto img = slurp(dir + "/image.bin"), frames = slurp(dir + "/frames.bin"),
         arena = slurp(dir + "/arena.bin"), off = slurp(dir + "/cand_off.bin"),
         rules = slurp(dir + "/cand_rules.bin"), em = slurp(dir + "/expect_matched.bin"),
         ev = slurp(dir + "/expect_verdicts.bin");
    // The kernels trust the image: one of another layout (written by another commit than these
    // headers) would read out of bounds, so it is refused here.
    char why[256];
    if (!pw_insp_image_check((const uint8_t *)img.data(), img.size(), why, sizeof why)) {
        fprintf(stderr, "%s/image.bin: %s; write the inputs again at this commit\n", dir.c_str(), why);
        return 2;
    }
    const uint32_t n = (uint32_t)(frames.size() / sizeof(pw_insp_frame));
    const uint32_t *h_off = (const uint32_t *)off.data();
    if (frames.size() % sizeof(pw_insp_frame) != 0 || off.size() != 4 * (size_t)(n + 1) ||
        em.size() != h_off[n] || rules.size() != 4 * (size_t)h_off[n] || ev.size() != sizeof(pw_insp_verdict) * n) {
        fprintf(stderr, "inputs disagree in size (%u frames)\n", n);
        return 2;
    }
    const uint32_t m = h_off[n];
    const uint8_t *d_img = upload<uint8_t>(img);
    const pw_insp_frame *d_frames = upload<pw_insp_frame>(frames);
    const uint8_t *d_arena = upload<uint8_t>(arena);
    const uint32_t *d_off = upload<uint32_t>(off), *d_rules = upload<uint32_t>(rules);
    uint8_t *d_matched;
    pw_insp_verdict *d_verdicts;
    CK(cudaMalloc(&d_matched, m + 1));
    CK(cudaMalloc(&d_verdicts, sizeof(pw_insp_verdict) * n + 8));
    const uint32_t threads = 256;
    auto run = [&]() {
        pw_insp_eval_kernel<<<(m + threads - 1) / threads, threads>>>(d_img, d_frames, n, d_arena, d_off,
                                                                        d_rules, d_matched);
        pw_insp_verdict_kernel<<<(n + threads - 1) / threads, threads>>>(d_img, n, d_off, d_rules,
                                                                           d_matched, d_verdicts);
    };
    CK(cudaMemset(d_matched, 0xee, m));
    run();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<uint8_t> matched(m);
    std::vector<pw_insp_verdict> verdicts(n);
    CK(cudaMemcpy(matched.data(), d_matched, m, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(verdicts.data(), d_verdicts, sizeof(pw_insp_verdict) * n, cudaMemcpyDeviceToHost));
    uint64_t bad = 0, hits = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = h_off[i]; j < h_off[i + 1]; j++) {
            hits += matched[j] == 1;
            if (matched[j] != (uint8_t)em[j] && bad++ < 10)
                printf("frame %u rule %u: GPU %u Rust %u\n", i, ((const uint32_t *)rules.data())[j],
                       matched[j], (uint8_t)em[j]);
        }
        const pw_insp_verdict *e = (const pw_insp_verdict *)ev.data() + i;
        if ((verdicts[i].rule != e->rule || verdicts[i].action != e->action) && bad++ < 10)
            printf("frame %u verdict: GPU rule %u action %u, Rust rule %u action %u\n", i, verdicts[i].rule,
                   verdicts[i].action, e->rule, e->action);
    }
    printf("%u frames, %u candidates, %llu matches, %llu differences\n", n, m, (unsigned long long)hits,
           (unsigned long long)bad);
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    CK(cudaEventRecord(t0));
    for (int r = 0; r < reps; r++) run();
    CK(cudaEventRecord(t1));
    CK(cudaEventSynchronize(t1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    printf("batch (both kernels): %.3f ms mean over %d runs, %.1f M candidates/s\n", ms / reps, reps,
           reps > 0 ? m / (ms / reps) / 1e3 : 0.0);
    return bad ? 1 : 0;
}
