// inspect_bench_gpu.cu's check without a GPU: the same headers compiled for the host (prefilter,
// candidate lists in the CPU engine's order, every candidate's full check, each frame's verdict)
// over one folder of `inspect-bench --dump DIR [--flow-rules]`, each frame's candidate count and
// verdict compared with the CPU engine's. Built with AddressSanitizer it finds the out-of-bounds
// reads that a GPU reports only as "an illegal memory access" (or not at all):
//   g++ -O1 -g -fsanitize=address,undefined -std=c++17 -I gpu-kernels/cuda
//       tools/gpu-probes/inspect_bench_host.cpp -o inspect_bench_host
//   ASAN_OPTIONS=detect_leaks=0 inspect_bench_host DIR/SIZE      (exit 1 on a difference)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "inspect_match.cuh"
#include "inspect_eval.cuh"

static std::vector<uint8_t> slurp(const std::string &p) {
    std::vector<uint8_t> v;
    FILE *f = fopen(p.c_str(), "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", p.c_str());
        exit(2);
    }
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) v.insert(v.end(), buf, buf + n);
    fclose(f);
    return v;
}

static std::vector<uint32_t> words(const std::string &p) {
    std::vector<uint8_t> b = slurp(p);
    std::vector<uint32_t> w(b.size() / 4);
    if (!w.empty()) memcpy(w.data(), b.data(), w.size() * 4);
    return w;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: inspect_bench_host DIR/SIZE\n");
        return 2;
    }
    const std::string d = argv[1];
    // Exact-size vectors, so that AddressSanitizer sees each input's end.
    auto img = slurp(d + "/program.bin"), fbytes = slurp(d + "/frames.bin"), arena = slurp(d + "/arena.bin"),
         ev = slurp(d + "/expect_verdicts.bin");
    auto always = words(d + "/always.bin"), sets = words(d + "/bufsets.bin"), en = words(d + "/expect_ncands.bin");
    char why[256];
    if (!pw_insp_image_check(img.data(), img.size(), why, sizeof why)) {
        fprintf(stderr, "%s/program.bin: %s; rebuild inspect-bench at this commit\n", d.c_str(), why);
        return 2;
    }
    const uint32_t n = (uint32_t)(fbytes.size() / sizeof(pw_insp_frame));
    if (sets.empty() || sets.size() != 1 + (size_t)sets[0] || fbytes.size() % sizeof(pw_insp_frame) != 0 ||
        en.size() != n || ev.size() != 8 * (size_t)n) {
        fprintf(stderr, "%s: inputs disagree in size\n", d.c_str());
        return 2;
    }
    std::vector<pw_insp_frame> fr(n);
    if (n) memcpy(fr.data(), fbytes.data(), fbytes.size());
    std::vector<std::vector<uint32_t>> cands(n, always);
    for (uint32_t k = 0; k < sets[0]; k++) {
        const uint32_t code = sets[1 + k];
        auto mimg = words(d + "/match_" + std::to_string(k) + ".bin");
        auto roff = words(d + "/rules_off_" + std::to_string(k) + ".bin");
        auto rules = words(d + "/rules_" + std::to_string(k) + ".bin");
        if (mimg.size() < 16 || mimg[0] != PW_IM_MAGIC || code >= PW_INSP_BUFFERS ||
            roff.size() != (size_t)mimg[PW_IM_N_PATTERNS] + 1 || roff.back() != rules.size()) {
            fprintf(stderr, "%s: buffer set %u is not a matcher dump\n", d.c_str(), k);
            return 2;
        }
        std::vector<uint32_t> row(pw_im_bitmap_words(mimg.data()));
        for (uint32_t i = 0; i < n; i++) {
            if (fr[i].buf_len[code] == PW_INSP_ABSENT) continue;
            for (uint32_t &w : row) w = 0;
            pw_inspect_match_set(mimg.data(), arena.data() + fr[i].data_off + fr[i].buf_off[code],
                                 fr[i].buf_len[code], row.data());
            for (uint32_t w = 0; w < row.size(); w++)
                for (uint32_t bits = row[w]; bits; bits &= bits - 1) {
                    uint32_t id = w * 32u + (uint32_t)__builtin_ctz(bits);
                    for (uint32_t r = roff[id]; r < roff[id + 1]; r++) cands[i].push_back(rules[r]);
                }
        }
    }
    std::vector<uint32_t> off(n + 1, 0), flat;
    for (uint32_t i = 0; i < n; i++) {
        flat.insert(flat.end(), cands[i].begin(), cands[i].end());
        off[i + 1] = (uint32_t)flat.size();
    }
    std::vector<uint8_t> matched(flat.size());
    uint32_t diff = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = off[i]; j < off[i + 1]; j++)
            matched[j] = pw_insp_eval_cand(img.data(), fr.data(), n, arena.data(), off.data(), flat.data(), j);
        pw_insp_verdict v = pw_insp_verdict_of(img.data(), off.data(), flat.data(), matched.data(), i);
        const uint8_t *e = ev.data() + 8 * (size_t)i;
        uint32_t e_rule;
        memcpy(&e_rule, e, 4);
        if (off[i + 1] - off[i] != en[i] || v.rule != e_rule || v.action != e[4]) {
            if (diff < 5)
                printf("frame %u: host %u candidates, rule %u; CPU %u, rule %u\n", i, off[i + 1] - off[i], v.rule,
                       en[i], e_rule);
            diff++;
        }
    }
    printf("%s: %u frames, %zu candidates: %u frames differ from the CPU engine\n", d.c_str(), n, flat.size(), diff);
    return diff ? 1 : 0;
}
