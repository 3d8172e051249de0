/* Stage `fronthaul` on the stage ABI (pktwarp_abi.h, section "stage ABI"): one thread per frame
 * for the checks and judgements, a warp per frame for its PRBs (pw_fh_round_end, in composed GPU
 * kernels), many frames at once, every shared write an atomic.
 *
 * Semantics: pktwarp_fronthaul::FronthaulStage (process_at for a frame with a receive time,
 * process_untimed for one without), held equal by fronthaul/tests/fronthaul_stage_host.rs through
 * the generated host pipeline:
 *   - the whole frame is checked by fronthaul.cuh's pw_fh_check (decode.rs `check`); a rejected
 *     frame is dropped (PW_DROP_FRONTHAUL), counted by reject code, and per eAxC when its PC_ID
 *     can be read and is in the grid; nothing of it is written;
 *   - a frame that is not eCPRI passes untouched (counted); a C-plane message passes (counted);
 *   - a U-plane frame of an eAxC outside the grid passes (counted `eaxc_unexpected`);
 *   - else its Ta4 window is judged from pw_frame.timestamp_ns (the receive time; the executor
 *     sends full descriptors for this stage, LibraryStage.reads_time) as track.rs `Timing` does:
 *     early / on time / late per eAxC, `untimed` when the time is 0;
 *   - and every PRB of every section is decompressed into the slot grid: int16 saturated, or
 *     FP16 of the saturated sample times beta (round to nearest even, as Rust's half crate);
 *     each PRB's arrival mark is set to the slot's tag, and a mark that already held the tag
 *     counts a duplicate PRB; the ring entry's state then adds the PRBs that were new.
 * The grid is a ring of `ring_slots` slot buffers indexed by the slot's number in the 2.56 s
 * frame cycle, (frameId * 10 + subframeId) * 2^mu + slotId, modulo the ring; its tag is that
 * number + 1, so marks left by an earlier occupant of a ring entry never read as this slot's.
 * Each entry's pw_fh_slot_state holds its tag, the PRBs stored with it and the latest receive
 * time: the host's completion poll (pktwarp_fronthaul::live) reads those words alone, closes a
 * slot complete when every expected PRB is there (or partial: evicted past max_open_slots, timed
 * out on the frames' receive times, end of run) and reads that entry back (gpu.rs `slot_of_entry`: the PRBs
 * whose mark is the slot's tag, the others zero, as a Rust slot grid starts).
 * Sequence ids (pw_fh_seq): frames of one eAxC run on many threads at once, in no order, and
 * SeqTracker's judgement of a frame depends on every frame before it in arrival order. So the
 * GPU judges nothing: each accepted U-plane packet of a grid eAxC appends (its arrival position:
 * pw_frame.queue, burst_seq, burst_index; its eAxC index; its 8-bit id) to the sequence log, a
 * ring the host's completion poll reads and judges in arrival order with the same SeqTracker
 * (pktwarp_fronthaul::seqlog; DESIGN.md, "Fronthaul", 2026-12-04).
 * A packet whose slot the host has closed (or whose ring entry holds a later slot) is refused as
 * in the Rust stage (pw_fh_slot_refused): counted per eAxC (slot_closed, with its PRBs), nothing
 * of it stored, dropped (PW_DROP_FRONTHAUL); it still counts as a packet, for its sequence id and
 * its Ta4 window. */
#ifndef PKTWARP_FRONTHAUL_STAGE_CUH
#define PKTWARP_FRONTHAUL_STAGE_CUH

#include "pktwarp_abi.h"
#include "count.cuh"
#include "fronthaul.cuh"

#define PW_FH_MAX_EAXCS 64u
#define PW_FH_FORMAT_INT16 0u
#define PW_FH_FORMAT_FP16 1u
/* Words of the stats buffer: [code] frames rejected by reject code (1..22), and: */
#define PW_FH_STATS 32u
#define PW_FH_STAT_SATURATED 0u /* samples that did not fit 16 bits */
#define PW_FH_STAT_TAKEN 31u    /* slots that took a ring entry (the host's poll sees each, or counts it lost) */

/* The stage's counters (pw_stage_counters.v[k], per queue). */
#define PW_FH_CTR_UPLANE 1u
#define PW_FH_CTR_CPLANE 2u
#define PW_FH_CTR_NOT_ECPRI 3u
#define PW_FH_CTR_REJECTED 4u
#define PW_FH_CTR_PRBS 5u
#define PW_FH_CTR_DUPLICATE_PRBS 6u
#define PW_FH_CTR_EAXC_UNEXPECTED 7u

/* Counters of one eAxC of the grid (shared by every queue). */
typedef struct pw_fh_eaxc_counters {
    uint64_t packets;        /*  0 U-plane packets accepted */
    uint64_t prbs;           /*  8 */
    uint64_t untimed;        /* 16 packets whose timing was not judged (no receive time) */
    uint64_t duplicate_prbs; /* 24 */
    uint64_t rejected;       /* 32 rejected frames whose PC_ID is this eAxC */
    uint64_t early;          /* 40 Ta4 windows of the packets with a receive time */
    uint64_t on_time;        /* 48 */
    uint64_t late;           /* 56 */
    uint64_t slot_closed;    /* 64 packets refused: their slot closed (pw_fh_slot_refused) */
    uint64_t slot_closed_prbs; /* 72 their PRBs (not stored, not in prbs) */
} pw_fh_eaxc_counters;
PW_STATIC_ASSERT(sizeof(pw_fh_eaxc_counters) == 80, "pw_fh_eaxc_counters size");

/* The sequence log (buffer `fronthaul.seq`): a 64-bit head (entries appended so far, an atomic
 * add), 8 bytes of padding, then PW_FH_SEQ_LOG entries, entry i at i % PW_FH_SEQ_LOG. An entry is
 * written whole (one 16-byte store on the GPU) with `lap` = i + 1 (low 32 bits), so the host
 * tells an entry of this lap from an older one, or one reserved and not yet written. */
#define PW_FH_SEQ_LOG 65536u
typedef struct pw_fh_seq_entry {
    uint32_t lap;         /*  0 log index + 1 */
    uint32_t burst_seq;   /*  4 pw_frame.burst_seq */
    uint32_t burst_index; /*  8 pw_frame.burst_index */
    uint32_t qe_id;       /* 12 pw_frame.queue << 16 | eAxC index << 8 | 8-bit sequence id */
} pw_fh_seq_entry;
PW_STATIC_ASSERT(sizeof(pw_fh_seq_entry) == 16, "pw_fh_seq_entry size");
#define PW_FH_SEQ_HEAD_BYTES 16u

/* The stage's parameter block (pktwarp_fronthaul::gpu::StageParams), built by Rust from the
 * FronthaulConfig; the five addresses are the stage's device buffers (patched in by the
 * executor; host addresses in the host build). */
typedef struct pw_fh_stage_params {
    pw_fh_params decode;    /*   0 carrier, numerology, compression */
    uint32_t n_eaxcs;       /*   8 eAxCs of the grid (1..64) */
    uint32_t ring_slots;    /*  12 slot buffers in the ring (>= 1) */
    uint32_t format;        /*  16 PW_FH_FORMAT_* */
    float beta;             /*  20 FP16 scale */
    uint64_t grid;          /*  24 int16 / FP16 [ring][eaxc][14][prbs][24] */
    uint64_t marks;         /*  32 uint32 [ring][eaxc][14][prbs]: tag of the slot that stored the PRB */
    uint64_t slot_state;    /*  40 pw_fh_slot_state [ring] */
    uint64_t eaxc_counters; /*  48 pw_fh_eaxc_counters [n_eaxcs] */
    uint64_t stats;         /*  56 uint64 [PW_FH_STATS] */
    uint16_t eaxc_ids[PW_FH_MAX_EAXCS]; /* 64 the grid's eAxC ids, by index */
    int64_t ta4_min_ns;     /* 192 Ta4 window: arrival - symbol start in [min, max] is on time */
    int64_t ta4_max_ns;     /* 200 */
    uint64_t time_offset_ns; /* 208 start of frame 0 since the Unix epoch, modulo the 2.56 s cycle */
    uint64_t seq;           /* 216 the sequence log (pw_fh_seq_entry, after a 16-byte head) */
    uint64_t closed;        /* 224 uint32 [ring]: the newest tag the host closed there (0: none) */
} pw_fh_stage_params;
PW_STATIC_ASSERT(sizeof(pw_fh_stage_params) == 232, "pw_fh_stage_params size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_fh_stage_params, grid) == 24, "pw_fh_stage_params.grid");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_fh_stage_params, stats) == 56, "pw_fh_stage_params.stats");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_fh_stage_params, eaxc_ids) == 64, "pw_fh_stage_params.eaxc_ids");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_fh_stage_params, ta4_min_ns) == 192, "pw_fh_stage_params.ta4_min_ns");

/* One ring entry's arrival state (the host's completion poll reads these alone). */
typedef struct pw_fh_slot_state {
    uint64_t tag_prbs; /* 0 tag << 32 | PRBs stored with that tag (duplicates not counted) */
    uint64_t last_ns;  /* 8 latest receive time of a frame of this tag that stored PRBs there (max; 0: none) */
} pw_fh_slot_state;
PW_STATIC_ASSERT(sizeof(pw_fh_slot_state) == 16, "pw_fh_slot_state size");

/* The frameId cycle: 256 frames of 10 ms. */
#define PW_FH_CYCLE_NS 2560000000ll
/* Packets by Ta4 window. */
#define PW_FH_EARLY 0u
#define PW_FH_ON_TIME 1u
#define PW_FH_LATE 2u

#if PW_GPU
#define PW_FH_XCHG32(p, v) atomicExch((unsigned int *)(p), (unsigned int)(v))
#define PW_FH_CAS64(p, e, v) \
    ((uint64_t)atomicCAS((unsigned long long *)(p), (unsigned long long)(e), (unsigned long long)(v)))
#define PW_FH_MAX64(p, v) atomicMax((unsigned long long *)(p), (unsigned long long)(v))
#define PW_FH_XCHG64(p, v) atomicExch((unsigned long long *)(p), (unsigned long long)(v))
#define PW_FH_FENCE() __threadfence()
#else
PW_DEVICE uint32_t pw_fh_xchg32_host(uint32_t *p, uint32_t v) {
    const uint32_t old = *p;
    *p = v;
    return old;
}
PW_DEVICE uint64_t pw_fh_cas64_host(uint64_t *p, uint64_t e, uint64_t v) {
    const uint64_t old = *p;
    if (old == e) *p = v;
    return old;
}
PW_DEVICE void pw_fh_max64_host(uint64_t *p, uint64_t v) {
    if (v > *p) *p = v;
}
#define PW_FH_XCHG32(p, v) pw_fh_xchg32_host((p), (v))
/* A host test may bring its own (gpu-kernels/host/fronthaul_slot_host.cpp looks at the entry
 * as another reader would right when a take's tag goes in). */
#ifndef PW_FH_CAS64
#define PW_FH_CAS64(p, e, v) pw_fh_cas64_host((p), (e), (v))
#endif
#define PW_FH_MAX64(p, v) pw_fh_max64_host((p), (v))
#define PW_FH_XCHG64(p, v) (*(p) = (v))
#define PW_FH_FENCE() ((void)0)
#endif

/* IEEE half of a float, rounded to nearest even (what Rust's half::f16::from_f32 gives), written
 * out so the GPU and the host build agree bit for bit. */
PW_DEVICE uint16_t pw_fh_f16(float x) {
    union {
        float f;
        uint32_t u;
    } c;
    c.f = x;
    const uint32_t sign = (c.u >> 16) & 0x8000u;
    const uint32_t a = c.u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
    const uint32_t e = a >> 23;
    if (e > 142u) return (uint16_t)(sign | 0x7c00u); /* 2^16 and above: infinity */
    if (e < 113u) {
        /* Below 2^-14: a subnormal half, q * 2^-24 with q = m * 2^(e - 126). */
        if (e < 102u) return (uint16_t)sign; /* under 2^-25: rounds to zero */
        const uint32_t m = (a & 0x7fffffu) | 0x800000u;
        const uint32_t s = 126u - e; /* 14..24 */
        uint32_t q = m >> s;
        const uint32_t rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t h = ((e - 112u) << 10) | ((a >> 13) & 0x3ffu);
    const uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry into the exponent is right */
    return (uint16_t)(sign | h);
}

/* Grid index of an eAxC id, or n_eaxcs when it is not in the grid. */
PW_DEVICE uint32_t pw_fh_eaxc_index(const pw_fh_stage_params *p, uint32_t id) {
    const uint32_t n = p->n_eaxcs < PW_FH_MAX_EAXCS ? p->n_eaxcs : PW_FH_MAX_EAXCS;
    for (uint32_t i = 0; i < n; i++)
        if (p->eaxc_ids[i] == id) return i;
    return n;
}

/* The PC_ID of a frame that looks like eCPRI IQ data / real-time control far enough, for
 * attributing a rejected frame (stage.rs `peek_eaxc`); 0x10000 when there is none. */
PW_DEVICE uint32_t pw_fh_peek_eaxc(const uint8_t *f, uint32_t len) {
    uint32_t off = 12u;
    if (len < off + 2u) return 0x10000u;
    uint32_t ty = pw_fh_be16(f, off);
    uint32_t tags = 0;
    while ((ty == 0x8100u || ty == 0x88A8u || ty == 0x9100u) && tags < PW_FH_MAX_VLAN) {
        off += 4u;
        if (len < off + 2u) return 0x10000u;
        ty = pw_fh_be16(f, off);
        tags++;
    }
    if (len < off + 4u) return 0x10000u;
    const uint32_t mt = f[off + 3u];
    if (ty != 0xAEFEu || (mt != 0u && mt != 2u)) return 0x10000u;
    if (len < off + 8u) return 0x10000u;
    return pw_fh_be16(f, off + 6u);
}

/* Stores one decompressed PRB at `cell` (eaxc, symbol, PRB of the ring entry); returns the
 * samples saturated. The 24 samples (48 bytes, 16-byte aligned: device allocations are 256-byte
 * aligned and a cell is 48 bytes) go out as three 16-byte stores. */
PW_DEVICE uint32_t pw_fh_store(const pw_fh_stage_params *p, uint64_t cell, const int32_t *iq) {
    uint32_t sat = 0;
    uint32_t w[PW_FH_PRB_SAMPLES / 2];
    const bool fp16 = p->format == PW_FH_FORMAT_FP16;
    for (uint32_t k = 0; k < PW_FH_PRB_SAMPLES; k++) {
        const int32_t x = iq[k];
        const int32_t s = x > 32767 ? 32767 : (x < -32768 ? -32768 : x);
        sat += s != x ? 1u : 0u;
        const uint32_t h = fp16 ? (uint32_t)pw_fh_f16((float)s * p->beta) : (uint32_t)(uint16_t)(int16_t)s;
        if (k & 1u) {
            w[k >> 1] |= h << 16;
        } else {
            w[k >> 1] = h;
        }
    }
    uint8_t *dst = (uint8_t *)p->grid + cell * (PW_FH_PRB_SAMPLES * 2u);
#if PW_GPU
    uint4 *d = (uint4 *)dst;
    d[0] = make_uint4(w[0], w[1], w[2], w[3]);
    d[1] = make_uint4(w[4], w[5], w[6], w[7]);
    d[2] = make_uint4(w[8], w[9], w[10], w[11]);
#else
    __builtin_memcpy(dst, w, sizeof w);
#endif
    return sat;
}

/* Adds `n` PRBs stored with `tag` (at receive time `ts`) to ring entry `ring`'s state. A tag
 * that differs from the entry's takes the entry when it is later in the frame cycle (less than
 * half a cycle ahead: a new occupant, counted from n) and is not counted when it is earlier (a
 * frame of a slot the ring has moved past). The grid stores before it are fenced, so a host
 * that reads the count and then the entry's cells sees every PRB the count says.
 * A slot taking the entry restarts its receive time BEFORE its tag goes in: the host's poll
 * reads the entry's time, when it first sees a slot, as the slot's first receive time (its
 * timeout's start). Written after the tag, a poll between the two read the previous occupant's
 * time (2 x max_open_slots slots older) as the new slot's and timed it out at once: closed
 * partial, out of order, its later packets refused (10 of 2000 slots of configs/fronthaul.yaml
 * on the GPU executor). */
PW_DEVICE void pw_fh_slot_add(const pw_fh_stage_params *p, uint32_t ring, uint32_t tag, uint32_t n, uint64_t ts) {
    pw_fh_slot_state *st = &((pw_fh_slot_state *)p->slot_state)[ring];
    const uint32_t mu = p->decode.numerology > 6 ? 6u : p->decode.numerology;
    const uint32_t cycle = 2560u << mu; /* slots in the frame cycle; tags are 1..cycle */
    PW_FH_FENCE();
    uint64_t old = *(volatile uint64_t *)&st->tag_prbs;
    bool took = false;
    for (;;) {
        const uint32_t t = (uint32_t)(old >> 32);
        uint64_t next;
        if (t == tag) {
            if (n == 0u) break;
            next = old + n;
        } else if (t == 0u || (tag + cycle - t) % cycle < cycle / 2u) {
            /* The time first, fenced: whoever sees this tag sees one of its frames' times. */
            PW_FH_XCHG64(&st->last_ns, ts);
            PW_FH_FENCE();
            next = ((uint64_t)tag << 32) | n;
        } else {
            return;
        }
        const uint64_t seen = PW_FH_CAS64(&st->tag_prbs, old, next);
        if (seen == old) {
            took = t != tag;
            break;
        }
        old = seen;
    }
    if (took) PW_ADD64(&((uint64_t *)p->stats)[PW_FH_STAT_TAKEN], 1);
    /* Also after a take: another frame of this slot that lost the take may have restarted the
     * time with an earlier one after this frame's own restart. */
    if (ts) PW_FH_MAX64(&st->last_ns, ts);
}

/* Sequence id `id` of a frame `f` of eAxC index `e`, logged with the frame's arrival position
 * for the host to judge in arrival order (pktwarp_fronthaul::seqlog). */
PW_DEVICE void pw_fh_seq(const pw_fh_stage_params *p, const pw_frame *f, uint32_t e, uint32_t id) {
    if (!p->seq) return;
    uint64_t *head = (uint64_t *)p->seq;
#if PW_GPU
    const uint64_t i = (uint64_t)atomicAdd((unsigned long long *)head, 1ull);
#else
    const uint64_t i = (*head)++;
#endif
    pw_fh_seq_entry *log = (pw_fh_seq_entry *)(p->seq + PW_FH_SEQ_HEAD_BYTES);
    pw_fh_seq_entry *en = &log[i % PW_FH_SEQ_LOG];
    const uint32_t qe = ((uint32_t)f->queue << 16) | ((e & 255u) << 8) | (id & 255u);
#if PW_GPU
    /* One 16-byte store: the host never sees the lap of this entry with another's fields. */
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(en), "r"((uint32_t)i + 1u), "r"(f->burst_seq),
                 "r"(f->burst_index), "r"(qe)
                 : "memory");
#else
    en->lap = (uint32_t)i + 1u;
    en->burst_seq = f->burst_seq;
    en->burst_index = f->burst_index;
    en->qe_id = qe;
#endif
}

/* The Ta4 window of a packet received at `t_ns` (pktwarp_fronthaul::track::Timing::classify):
 * arrival minus the start of its symbol's occurrence nearest to the arrival in the 2.56 s
 * frame cycle (symbols of equal length), against [ta4_min_ns, ta4_max_ns]. */
PW_DEVICE_CALL uint32_t pw_fh_classify(const pw_fh_stage_params *p, const pw_fh_info *info, uint64_t t_ns) {
    const uint32_t mu = p->decode.numerology > 6 ? 6u : p->decode.numerology;
    const int64_t slot = 1000000ll >> mu;
    const int64_t sym = (int64_t)info->frame_id * 10000000ll + (int64_t)info->subframe_id * 1000000ll +
                        (int64_t)info->slot_id * slot + (int64_t)info->symbol_id * slot / 14ll;
    const int64_t t = (int64_t)((t_ns - p->time_offset_ns) % (uint64_t)PW_FH_CYCLE_NS);
    int64_t d = t - sym;
    if (d > PW_FH_CYCLE_NS / 2) {
        d -= PW_FH_CYCLE_NS;
    } else if (d < -PW_FH_CYCLE_NS / 2) {
        d += PW_FH_CYCLE_NS;
    }
    if (d < p->ta4_min_ns) return PW_FH_EARLY;
    return d > p->ta4_max_ns ? PW_FH_LATE : PW_FH_ON_TIME;
}

/* (pw_fh_classify and pw_fh_write_prbs are calls, not inlined: inlined into the persistent
 * kernel their registers added to the transport's spilled.) */

/* Whether tag `a` is tag `b` or later in the frame cycle (less than half a cycle after it);
 * 0 (none) never is (grid.rs `at_or_after`). */
PW_DEVICE bool pw_fh_at_or_after(uint32_t a, uint32_t b, uint32_t cycle) {
    return a != 0u && b != 0u && ((a % cycle) + cycle - (b % cycle)) % cycle < cycle / 2u;
}

/* Whether a packet of slot `tag` (ring entry `ring`) is refused (grid.rs `SlotRing::refuses`):
 * the host closed that slot or a later one of the entry (pw_fh_stage_params.closed, written by
 * the host's completion poll before it reads the entry back), or the entry holds a later slot.
 * The slot handed to the sink then never changes, and a PRB of an earlier slot never lands in
 * a later slot's cells. */
PW_DEVICE bool pw_fh_slot_refused(const pw_fh_stage_params *p, uint32_t ring, uint32_t tag) {
    const uint32_t mu = p->decode.numerology > 6 ? 6u : p->decode.numerology;
    const uint32_t cycle = 2560u << mu;
    const uint32_t closed = p->closed ? *(volatile const uint32_t *)&((const uint32_t *)p->closed)[ring] : 0u;
    const pw_fh_slot_state *st = &((const pw_fh_slot_state *)p->slot_state)[ring];
    const uint32_t held = (uint32_t)(*(volatile const uint64_t *)&st->tag_prbs >> 32);
    return pw_fh_at_or_after(closed, tag, cycle) || (held != tag && pw_fh_at_or_after(held, tag, cycle));
}

/* The slot number of an accepted U-plane frame in the frame cycle. */
PW_DEVICE uint32_t pw_fh_slot_number(const pw_fh_stage_params *p, const pw_fh_info *info) {
    const uint32_t mu = p->decode.numerology > 6 ? 6u : p->decode.numerology;
    return ((((uint32_t)info->frame_id * 10u) + info->subframe_id) << mu) + info->slot_id;
}

/* The PRBs of an accepted U-plane frame (body [body_start, body_end), its symbol) of grid eAxC
 * `e` that lane `lane` of `lanes` decodes into ring entry `ring` with slot tag `tag`: PRB k of
 * each section where k % lanes == lane (lanes 1: every PRB, in order). Adds the duplicates
 * (a mark that already held the tag) to *dups and the saturated samples to *sat. Each lane's
 * grid stores are fenced before it returns (the count that pw_fh_frame_done adds must never run
 * ahead of them). Two sections of one frame that name the same PRB count one duplicate either
 * way; with lanes > 1 which of the two sample sets stays is not fixed (as for two frames of one
 * burst, which run at once on the GPU). */
PW_DEVICE_CALL void pw_fh_write_prbs_part(const uint8_t *f, const pw_fh_stage_params *p, uint32_t body_start,
                                          uint32_t body_end, uint32_t symbol, uint32_t e, uint32_t ring, uint32_t tag,
                                          uint32_t lane, uint32_t lanes, uint32_t *dups, uint32_t *sat) {
    const uint64_t prbs = p->decode.carrier_prbs;
    const uint64_t base = ((uint64_t)ring * p->n_eaxcs + e) * PW_FH_SYMBOLS;
    pw_fh_cursor c;
    c.off = body_start;
    c.end = body_end;
    c.symbol = symbol;
    while (c.off < c.end) {
        pw_fh_section s;
        if (pw_fh_next_section(f, &c, &p->decode, &s) != PW_FH_OK) break; /* cannot happen: checked */
        for (uint32_t k = lane; k < s.num_prb; k += lanes) {
            int32_t iq[PW_FH_PRB_SAMPLES];
            pw_fh_decompress_prb(f + s.data + k * s.prb_bytes, s.method, s.width, iq);
            const uint64_t cell = (base + s.symbol) * prbs + (s.start_prb + k * s.stride);
            *sat += pw_fh_store(p, cell, iq);
            if (PW_FH_XCHG32(&((uint32_t *)p->marks)[cell], tag) == tag) (*dups)++;
        }
    }
    PW_FH_FENCE();
}

/* What follows an accepted frame's PRBs (all lanes' stores done and fenced): the ring entry's
 * state adds the `prbs - dups` PRBs that were new, and the counters. */
PW_DEVICE void pw_fh_frame_done(const pw_fh_stage_params *p, pw_stage_counters *c, uint32_t e, uint32_t ring,
                                uint32_t tag, uint32_t prbs, uint64_t ts, uint32_t dups, uint32_t sat) {
    pw_fh_eaxc_counters *ec = (pw_fh_eaxc_counters *)p->eaxc_counters;
    pw_fh_slot_add(p, ring, tag, prbs - dups, ts);
    PW_ADD64(&ec[e].prbs, prbs);
    PW_ADD64(&c->v[PW_FH_CTR_PRBS], prbs);
    if (dups) {
        PW_ADD64(&c->v[PW_FH_CTR_DUPLICATE_PRBS], dups);
        PW_ADD64(&ec[e].duplicate_prbs, dups);
    }
    if (sat) PW_ADD64(&((uint64_t *)p->stats)[PW_FH_STAT_SATURATED], sat);
}

/* PRBs spread over a warp (GPU, composed kernels). One thread per frame decoding its PRBs one
 * after another held a burst for one frame's whole decode (50 PRBs in series) while the rest of
 * the CTA idled: the whole daemon fed 0.13 M frames/s a queue where the transport alone moves
 * 2.6 M (docs/perf-log.md, "the whole GPU fronthaul daemon, fed", 2026-12-04). So on the GPU the
 * per-frame pass (pw_stage_fronthaul) checks, judges and refuses each frame and queues its PRB
 * work in shared memory; the transport ends every round of frames with PW_PIPELINE_ROUND_END (whole
 * block, while the round's frames are still where they ran), where each warp takes queued frames
 * and its lanes decode their PRBs. A frame that finds the queue full (a pipeline with two fronthaul
 * stages) decodes in its own thread. The host build decodes in the per-frame pass with the same two
 * functions (lane 0 of 1). */
#if PW_GPU && PW_PIPELINE_COMPOSED
#define PW_FH_WARP_DECODE 1
typedef struct pw_fh_work {
    const uint8_t *f;
    const pw_fh_stage_params *p;
    pw_stage_counters *c;
    uint64_t ts;
    uint32_t tag;
    uint32_t prbs;
    uint16_t body_start, body_end, e, ring;
    uint32_t symbol;
} pw_fh_work;
/* At most a round's frames: blockDim.x <= 256 in every composed kernel (pw_bulk's bound, and
 * setup.rs COMPOSED_MAX_THREADS). */
#define PW_FH_WORK_MAX 256u
__shared__ pw_fh_work pw_fh_work_list[PW_FH_WORK_MAX];
__shared__ uint32_t pw_fh_work_n;

/* Queues an accepted frame's PRBs for the round's end; false when it cannot be queued. */
PW_DEVICE bool pw_fh_defer(const uint8_t *f, const pw_fh_stage_params *p, pw_stage_counters *c,
                           const pw_fh_info *info, uint32_t e, uint64_t ts, uint32_t ring, uint32_t tag) {
    if (info->body_end > 0xFFFFu || ring > 0xFFFFu) return false;
    const uint32_t i = atomicAdd(&pw_fh_work_n, 1u);
    if (i >= PW_FH_WORK_MAX) return false;
    pw_fh_work w;
    w.f = f;
    w.p = p;
    w.c = c;
    w.ts = ts;
    w.tag = tag;
    w.prbs = info->prbs;
    w.body_start = (uint16_t)info->body_start;
    w.body_end = (uint16_t)info->body_end;
    w.e = (uint16_t)e;
    w.ring = (uint16_t)ring;
    w.symbol = info->symbol_id;
    pw_fh_work_list[i] = w;
    return true;
}

/* Whole block, before a round's frames run. */
__device__ __forceinline__ void pw_fh_round_begin() {
    if (threadIdx.x == 0) pw_fh_work_n = 0u;
    __syncthreads();
}

/* Whole block (blockDim.x a multiple of 32), after a round's frames ran: every queued frame's
 * PRBs, a warp a frame, its lanes over the PRBs. */
__device__ __forceinline__ void pw_fh_round_end() {
    __syncthreads();
    const uint32_t n = pw_fh_work_n < PW_FH_WORK_MAX ? pw_fh_work_n : PW_FH_WORK_MAX;
    const uint32_t lane = threadIdx.x & 31u;
    for (uint32_t i = threadIdx.x >> 5; i < n; i += blockDim.x >> 5) {
        const pw_fh_work w = pw_fh_work_list[i];
        uint32_t dups = 0u, sat = 0u;
        pw_fh_write_prbs_part(w.f, w.p, w.body_start, w.body_end, w.symbol, w.e, w.ring, w.tag, lane, 32u, &dups,
                              &sat);
#pragma unroll
        for (uint32_t o = 16u; o > 0u; o >>= 1) {
            dups += __shfl_xor_sync(0xFFFFFFFFu, dups, o);
            sat += __shfl_xor_sync(0xFFFFFFFFu, sat, o);
        }
        if (lane == 0u) pw_fh_frame_done(w.p, w.c, w.e, w.ring, w.tag, w.prbs, w.ts, dups, sat);
    }
    __syncthreads();
}
#define PW_PIPELINE_ROUND_BEGIN() pw_fh_round_begin()
#define PW_PIPELINE_ROUND_END() pw_fh_round_end()
#else
#define PW_FH_WARP_DECODE 0
#endif

/* Stage `fronthaul`. */
PW_DEVICE void pw_stage_fronthaul(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v, const void *params,
                                  pw_stage_counters *c) {
    (void)meta;
    const pw_fh_stage_params *p = (const pw_fh_stage_params *)params;
    if (!p) return; /* no parameter block: the frame passes untouched */
    pw_fh_info info;
    const uint32_t code = pw_fh_check(f->data, f->len, &p->decode, &info);
    pw_fh_eaxc_counters *ec = (pw_fh_eaxc_counters *)p->eaxc_counters;
    uint64_t *stats = (uint64_t *)p->stats;
    if (code == PW_FH_NOT_ECPRI) {
        PW_ADD64(&c->v[PW_FH_CTR_NOT_ECPRI], 1);
        return;
    }
    if (code != PW_FH_OK) {
        PW_ADD64(&c->v[PW_FH_CTR_REJECTED], 1);
        if (code < PW_FH_STATS) PW_ADD64(&stats[code], 1);
        const uint32_t id = pw_fh_peek_eaxc(f->data, f->len);
        const uint32_t e = id < 0x10000u ? pw_fh_eaxc_index(p, id) : p->n_eaxcs;
        if (e < p->n_eaxcs) PW_ADD64(&ec[e].rejected, 1);
        v->action = (uint8_t)PW_ACTION_DROP;
        v->drop_reason = (uint8_t)PW_DROP_FRONTHAUL;
        return;
    }
    if (info.msg_type != 0u) {
        PW_ADD64(&c->v[PW_FH_CTR_CPLANE], 1);
        return;
    }
    PW_ADD64(&c->v[PW_FH_CTR_UPLANE], 1);
    const uint32_t e = pw_fh_eaxc_index(p, info.eaxc);
    if (e >= p->n_eaxcs) {
        PW_ADD64(&c->v[PW_FH_CTR_EAXC_UNEXPECTED], 1);
        return;
    }
    PW_ADD64(&ec[e].packets, 1);
    pw_fh_seq(p, f, e, (uint32_t)info.seq_raw >> 8);
    if (f->timestamp_ns == 0) {
        PW_ADD64(&ec[e].untimed, 1);
    } else {
        const uint32_t w = pw_fh_classify(p, &info, f->timestamp_ns);
        PW_ADD64(w == PW_FH_EARLY ? &ec[e].early : (w == PW_FH_LATE ? &ec[e].late : &ec[e].on_time), 1);
    }
    const uint32_t n = pw_fh_slot_number(p, &info);
    const uint32_t ring = p->ring_slots ? n % p->ring_slots : 0u;
    if (pw_fh_slot_refused(p, ring, n + 1u)) {
        PW_ADD64(&ec[e].slot_closed, 1);
        PW_ADD64(&ec[e].slot_closed_prbs, info.prbs);
        /* Dropped, so the queue's totals say where its PRBs went. */
        v->action = (uint8_t)PW_ACTION_DROP;
        v->drop_reason = (uint8_t)PW_DROP_FRONTHAUL;
        return;
    }
#if PW_FH_WARP_DECODE
    if (pw_fh_defer(f->data, p, c, &info, e, f->timestamp_ns, ring, n + 1u)) return;
#endif
    uint32_t dups = 0u, sat = 0u;
    pw_fh_write_prbs_part(f->data, p, info.body_start, info.body_end, info.symbol_id, e, ring, n + 1u, 0u, 1u, &dups,
                          &sat);
    pw_fh_frame_done(p, c, e, ring, n + 1u, info.prbs, f->timestamp_ns, dups, sat);
}

#endif /* PKTWARP_FRONTHAUL_STAGE_CUH */
