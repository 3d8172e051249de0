// The whole inspection on the GPU over device-resident frames: per buffer set the prefilter
// kernel (inspect_match.cuh, the thread or the warp walker), the candidate lists built from
// the match bitmaps (count, exclusive scan, fill: the order of the CPU engine), every
// candidate's full check and each frame's verdict (inspect_eval.cuh). Inputs: one folder of
//   inspect-bench --dump DIR [--flow-rules]   (pipeline/inspect/examples/inspect-bench/dump.rs)
// i.e. DIR/SIZE. Checks every frame's candidate count and verdict against the CPU engine's
// (exit 1 on a difference), then times REPS batches: payload Gbit/s and Mpps of the prefilter
// alone and of the whole inspection, per walker.
//   inspect_bench_gpu DIR/SIZE [REPS=20]
#include <cstring>
#include <functional>
#include "inspect_match.cuh"
#include "inspect_eval.cuh"
#include "tool_io.cuh"

static std::vector<uint32_t> words(const std::string &p) {
    std::vector<char> b = slurp(p);
    std::vector<uint32_t> w(b.size() / 4);
    if (!w.empty()) memcpy(w.data(), b.data(), w.size() * 4);
    return w;
}

template <typename T> static T *upload(const void *p, size_t bytes) {
    T *d;
    CK(cudaMalloc(&d, bytes + 8));
    if (bytes) CK(cudaMemcpy(d, p, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* One buffer set on the device: its matcher image, the frames' buffer spans, the bitmaps,
 * each pattern's rules (CSR). */
struct bset {
    const uint32_t *img, *off, *len, *roff, *rules;
    uint32_t *bm;
    uint32_t words;
};

/* Rules of the matched patterns of frame i: counted (out == NULL) or written at out. */
__device__ uint32_t cands_of(const bset *sets, uint32_t k_n, const uint32_t *always, uint32_t n_always, uint32_t i,
                             uint32_t *out) {
    uint32_t c = 0;
    for (uint32_t a = 0; a < n_always; a++, c++)
        if (out) out[c] = always[a];
    for (uint32_t k = 0; k < k_n; k++) {
        const bset s = sets[k];
        const uint32_t *row = s.bm + (uint64_t)i * s.words;
        for (uint32_t w = 0; w < s.words; w++) {
            uint32_t bits = row[w];
            while (bits) {
                uint32_t id = w * 32u + (uint32_t)__ffs(bits) - 1u;
                bits &= bits - 1u;
                for (uint32_t r = s.roff[id]; r < s.roff[id + 1]; r++, c++)
                    if (out) out[c] = s.rules[r];
            }
        }
    }
    return c;
}

__global__ void count_kernel(const bset *sets, uint32_t k_n, const uint32_t *always, uint32_t n_always, uint32_t n,
                             uint32_t *counts) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) counts[i] = cands_of(sets, k_n, always, n_always, i, nullptr);
}

__global__ void fill_kernel(const bset *sets, uint32_t k_n, const uint32_t *always, uint32_t n_always, uint32_t n,
                            const uint32_t *cand_off, uint32_t *cand_rules) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) cands_of(sets, k_n, always, n_always, i, cand_rules + cand_off[i]);
}

/* Exclusive scan of 1024-element blocks; block b's total into sums[b]. */
__global__ void __launch_bounds__(1024) scan_block(const uint32_t *in, uint32_t *out, uint32_t *sums, uint32_t n) {
    __shared__ uint32_t s[1024];
    uint32_t t = threadIdx.x, i = blockIdx.x * 1024u + t;
    uint32_t v = i < n ? in[i] : 0u;
    s[t] = v;
    __syncthreads();
    for (uint32_t d = 1; d < 1024u; d <<= 1) {
        uint32_t x = t >= d ? s[t - d] : 0u;
        __syncthreads();
        s[t] += x;
        __syncthreads();
    }
    if (i < n) out[i] = s[t] - v;
    if (t == 1023u) sums[blockIdx.x] = s[1023];
}

/* out[i] += the blocks before i's block; out[n] = the total. */
__global__ void scan_add(uint32_t *out, const uint32_t *sums_ex, const uint32_t *sums, uint32_t n, uint32_t nb) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += sums_ex[i / 1024u];
    if (i == n) out[n] = sums_ex[nb - 1] + sums[nb - 1];
}

struct batch {
    std::vector<bset> sets;
    bset *d_sets;
    uint32_t k_n, n, n_always, *d_always, *counts, *cand_off, *sums, *sums_ex, *scratch, *cand_rules;
    uint8_t *img, *arena, *matched;
    pw_insp_frame *frames;
    pw_insp_verdict *verdicts;
    size_t cap;
};

typedef void (*match_kernel)(const uint32_t *, const uint8_t *, const uint32_t *, const uint32_t *, uint32_t,
                             uint32_t *);

static void prefilter(batch &b, match_kernel k, uint32_t per) {
    for (const bset &s : b.sets) {
        uint64_t th = (uint64_t)b.n * per;
        k<<<(uint32_t)((th + 255) / 256), 256>>>(s.img, b.arena, s.off, s.len, b.n, s.bm);
    }
}

/* The candidate lists and the rule checks after `prefilter`; returns the candidates (synchronous
 * only when `sync`). */
static uint32_t rest(batch &b, bool sync, uint32_t m_known) {
    const uint32_t t = 256, nb = (b.n + 1023) / 1024;
    count_kernel<<<(b.n + t - 1) / t, t>>>(b.d_sets, b.k_n, b.d_always, b.n_always, b.n, b.counts);
    scan_block<<<nb, 1024>>>(b.counts, b.cand_off, b.sums, b.n);
    scan_block<<<1, 1024>>>(b.sums, b.sums_ex, b.scratch, nb);
    scan_add<<<(b.n + 1 + t - 1) / t, t>>>(b.cand_off, b.sums_ex, b.sums, b.n, nb);
    uint32_t m = m_known;
    if (sync) CK(cudaMemcpy(&m, b.cand_off + b.n, 4, cudaMemcpyDeviceToHost));
    if (m > b.cap) {
        fprintf(stderr, "%u candidates, over the %zu allocated\n", m, b.cap);
        exit(2);
    }
    fill_kernel<<<(b.n + t - 1) / t, t>>>(b.d_sets, b.k_n, b.d_always, b.n_always, b.n, b.cand_off, b.cand_rules);
    if (m) pw_insp_eval_kernel<<<(m + t - 1) / t, t>>>(b.img, b.frames, b.n, b.arena, b.cand_off, b.cand_rules, b.matched);
    pw_insp_verdict_kernel<<<(b.n + t - 1) / t, t>>>(b.img, b.n, b.cand_off, b.cand_rules, b.matched, b.verdicts);
    CK(cudaGetLastError());
    return m;
}

static float time_ms(int reps, const std::function<void()> &f) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0));
    for (int r = 0; r < reps; r++) f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms / reps;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: inspect_bench_gpu DIR/SIZE [REPS=20]\n");
        return 2;
    }
    const std::string d = argv[1];
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    auto img = slurp(d + "/program.bin"), frames = slurp(d + "/frames.bin"), arena = slurp(d + "/arena.bin"),
         ev = slurp(d + "/expect_verdicts.bin");
    auto always = words(d + "/always.bin"), sets = words(d + "/bufsets.bin"), en = words(d + "/expect_ncands.bin");
    // The kernels trust their inputs: a dump of another layout (an inspect-bench binary of
    // another commit than these headers) would read out of bounds, so it is refused here.
    char why[256];
    if (!pw_insp_image_check((const uint8_t *)img.data(), img.size(), why, sizeof why)) {
        fprintf(stderr, "%s/program.bin: %s; rebuild inspect-bench at this commit\n", d.c_str(), why);
        return 2;
    }
    const uint32_t n_rules = ((const pw_insp_header *)img.data())->n_rules;
    batch b;
    b.n = (uint32_t)(frames.size() / sizeof(pw_insp_frame));
    if (sets.empty() || frames.size() % sizeof(pw_insp_frame) != 0 || en.size() != b.n ||
        ev.size() != 8 * (size_t)b.n || b.n == 0 || b.n > 1024u * 1024u) {
        fprintf(stderr, "%s: inputs disagree in size (or over 1M frames)\n", d.c_str());
        return 2;
    }
    b.k_n = sets[0];
    if (sets.size() != 1 + (size_t)b.k_n) {
        fprintf(stderr, "%s: bufsets.bin lists %zu sets, says %u\n", d.c_str(), sets.size() - 1, b.k_n);
        return 2;
    }
    b.n_always = (uint32_t)always.size();
    const pw_insp_frame *hf = (const pw_insp_frame *)frames.data();
    for (uint32_t i = 0; i < b.n; i++)
        for (uint32_t k = 0; k < PW_INSP_BUFFERS; k++)
            if (hf[i].buf_len[k] != PW_INSP_ABSENT &&
                (uint64_t)hf[i].data_off + hf[i].buf_off[k] + hf[i].buf_len[k] > arena.size()) {
                fprintf(stderr, "%s: frame %u: buffer %u is out of arena.bin\n", d.c_str(), i, k);
                return 2;
            }
    auto rules_ok = [&](const std::vector<uint32_t> &v, const char *what) {
        for (uint32_t r : v)
            if (r >= n_rules) {
                fprintf(stderr, "%s/%s: rule %u, the image has %u\n", d.c_str(), what, r, n_rules);
                return false;
            }
        return true;
    };
    if (!rules_ok(always, "always.bin")) return 2;
    uint64_t payload_bytes = 0, m_expect = 0;
    for (uint32_t i = 0; i < b.n; i++) payload_bytes += hf[i].buf_len[0], m_expect += en[i];
    b.arena = upload<uint8_t>(arena.data(), arena.size());
    for (uint32_t k = 0; k < b.k_n; k++) {
        const uint32_t code = sets[1 + k];
        auto mimg = words(d + "/match_" + std::to_string(k) + ".bin");
        auto roff = words(d + "/rules_off_" + std::to_string(k) + ".bin");
        auto rules = words(d + "/rules_" + std::to_string(k) + ".bin");
        if (mimg.size() < 16 || mimg[0] != PW_IM_MAGIC || code >= PW_INSP_BUFFERS ||
            roff.size() != (size_t)mimg[PW_IM_N_PATTERNS] + 1 || roff[0] != 0 || roff.back() != rules.size()) {
            fprintf(stderr, "%s: buffer set %u is not a matcher dump\n", d.c_str(), k);
            return 2;
        }
        for (size_t q = 1; q < roff.size(); q++)
            if (roff[q] < roff[q - 1]) {
                fprintf(stderr, "%s: rules_off_%u.bin is not ascending\n", d.c_str(), k);
                return 2;
            }
        if (!rules_ok(rules, ("rules_" + std::to_string(k) + ".bin").c_str())) return 2;
        std::vector<uint32_t> off(b.n), len(b.n);
        for (uint32_t i = 0; i < b.n; i++) {
            bool has = hf[i].buf_len[code] != PW_INSP_ABSENT;
            off[i] = has ? hf[i].data_off + hf[i].buf_off[code] : 0u;
            len[i] = has ? hf[i].buf_len[code] : 0u;
        }
        bset s;
        s.words = (mimg[PW_IM_N_PATTERNS] + 31) / 32;
        s.img = upload<uint32_t>(mimg.data(), mimg.size() * 4);
        s.off = upload<uint32_t>(off.data(), off.size() * 4);
        s.len = upload<uint32_t>(len.data(), len.size() * 4);
        s.roff = upload<uint32_t>(roff.data(), roff.size() * 4);
        s.rules = upload<uint32_t>(rules.data(), rules.size() * 4);
        CK(cudaMalloc(&s.bm, (size_t)b.n * s.words * 4 + 4));
        b.sets.push_back(s);
    }
    b.d_sets = upload<bset>(b.sets.data(), b.sets.size() * sizeof(bset));
    b.d_always = upload<uint32_t>(always.data(), always.size() * 4);
    b.img = upload<uint8_t>(img.data(), img.size());
    b.frames = upload<pw_insp_frame>(frames.data(), frames.size());
    b.cap = m_expect + 1;
    CK(cudaMalloc(&b.counts, (size_t)b.n * 4 + 4));
    CK(cudaMalloc(&b.cand_off, (size_t)b.n * 4 + 8));
    CK(cudaMalloc(&b.sums, 4096 + 8));
    CK(cudaMalloc(&b.sums_ex, 4096 + 8));
    CK(cudaMalloc(&b.scratch, 64));
    CK(cudaMalloc(&b.cand_rules, b.cap * 4));
    CK(cudaMalloc(&b.matched, b.cap));
    CK(cudaMalloc(&b.verdicts, (size_t)b.n * sizeof(pw_insp_verdict) + 8));
    printf("%s: %u frames, %.1f MB of payload, %u buffer sets, %u rules always candidates, %llu candidates\n",
           d.c_str(), b.n, payload_bytes / 1e6, b.k_n, b.n_always, (unsigned long long)m_expect);
    int bad = 0;
    const struct {
        const char *name;
        match_kernel k;
        uint32_t per;
    } walkers[2] = {{"thread", pw_inspect_match_kernel, 1}, {"warp", pw_inspect_match_warp_kernel, 32}};
    for (const auto &w : walkers) {
        prefilter(b, w.k, w.per);
        uint32_t m = rest(b, true, 0);
        CK(cudaDeviceSynchronize());
        std::vector<uint32_t> off(b.n + 1);
        std::vector<pw_insp_verdict> v(b.n);
        CK(cudaMemcpy(off.data(), b.cand_off, off.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(v.data(), b.verdicts, v.size() * sizeof(pw_insp_verdict), cudaMemcpyDeviceToHost));
        uint32_t diff = 0;
        for (uint32_t i = 0; i < b.n; i++) {
            const pw_insp_verdict *e = (const pw_insp_verdict *)ev.data() + i;
            if (off[i + 1] - off[i] != en[i] || v[i].rule != e->rule || v[i].action != e->action) {
                if (diff < 5)
                    printf("%s: frame %u: GPU %u candidates, rule %u; CPU %u, rule %u\n", w.name, i,
                           off[i + 1] - off[i], v[i].rule, en[i], e->rule);
                diff++;
            }
        }
        bad |= diff != 0;
        float pre = time_ms(reps, [&] { prefilter(b, w.k, w.per); });
        float all = time_ms(reps, [&] {
            prefilter(b, w.k, w.per);
            rest(b, false, m);
        });
        auto row = [&](const char *scope, float ms) {
            printf("| %s walker | %s | %.3f ms | %.2f Gbit/s | %.2f Mpps |\n", w.name, scope, ms,
                   ms > 0 ? payload_bytes * 8.0 / (ms * 1e6) : 0.0, ms > 0 ? b.n / (ms * 1e3) : 0.0);
        };
        printf("%s walker: %u frames differ from the CPU engine\n", w.name, diff);
        row("prefilter", pre);
        row("whole (prefilter + candidate lists + rule checks + verdicts)", all);
    }
    return bad ? 1 : 0;
}
