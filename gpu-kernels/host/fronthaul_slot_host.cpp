// Host build of the slot state update of cuda/fronthaul_stage.cuh (pw_fh_slot_add) with its
// compare-and-swap watched: fronthaul/tests/fronthaul_slot_take.rs checks what another reader
// (the host's completion poll, reading the GPU's slot states while the kernel runs) sees at the
// instant a slot's tag takes a ring entry, which a sequential run never shows.
#include <stdint.h>

static uint64_t pw_fh_watched_cas(uint64_t *p, uint64_t e, uint64_t v);
#define PW_FH_CAS64(p, e, v) pw_fh_watched_cas((p), (e), (v))
#include "fronthaul_stage.cuh"

// The entry (tag_prbs, last_ns) right after the last swap that changed its tag.
static uint64_t pw_fh_at_take[2];
static uint32_t pw_fh_takes;

static uint64_t pw_fh_watched_cas(uint64_t *p, uint64_t e, uint64_t v) {
    const uint64_t old = *p;
    if (old != e) return old;
    *p = v;
    if ((old >> 32) != (v >> 32)) {
        const pw_fh_slot_state *st = (const pw_fh_slot_state *)p; // tag_prbs is its first word
        pw_fh_at_take[0] = st->tag_prbs;
        pw_fh_at_take[1] = st->last_ns;
        pw_fh_takes++;
    }
    return old;
}

// One pw_fh_slot_add on `state` (one pw_fh_slot_state, updated in place) at numerology `mu`.
// Returns how many swaps changed the entry's tag; `seen` gets the entry as a reader saw it
// right after the last of them (tag_prbs, last_ns). Not thread safe (one test thread).
extern "C" uint32_t pw_host_fh_slot_add_watched(uint64_t *state, uint32_t mu, uint32_t tag, uint32_t n,
                                                uint64_t ts, uint64_t *seen) {
    uint64_t stats[PW_FH_STATS] = {0};
    pw_fh_stage_params p = {};
    p.decode.numerology = (uint8_t)mu;
    p.n_eaxcs = 1;
    p.ring_slots = 1;
    p.slot_state = (uint64_t)(uintptr_t)state;
    p.stats = (uint64_t)(uintptr_t)stats;
    pw_fh_takes = 0;
    pw_fh_at_take[0] = pw_fh_at_take[1] = 0;
    pw_fh_slot_add(&p, 0, tag, n, ts);
    seen[0] = pw_fh_at_take[0];
    seen[1] = pw_fh_at_take[1];
    return pw_fh_takes;
}
