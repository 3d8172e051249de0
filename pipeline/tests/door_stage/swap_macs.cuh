/* `swap_macs` on the stage ABI: the Rust side is mod.rs beside this file, with ONE semantics.
 * Parameter block: uint32_t proto. */
PW_DEVICE void pw_test_swap_macs(pw_frame *f, pw_packet_meta *m, pw_verdict *v,
                                 const void *params, pw_stage_counters *c) {
    const uint32_t proto = *(const uint32_t *)params;
    if (f->len < 14u || m->ip_proto != proto) return;
    if (f->data[0] == 0xFFu && f->data[1] == 0xFFu && f->data[2] == 0xFFu &&
        f->data[3] == 0xFFu && f->data[4] == 0xFFu && f->data[5] == 0xFFu) {
        PW_ADD64(&c->v[2], 1);
        v->action = (uint8_t)PW_ACTION_DROP;
        v->drop_reason = (uint8_t)PW_DROP_NO_ROUTE;
        return;
    }
    for (int i = 0; i < 6; i++) {
        const uint8_t t = f->data[i];
        f->data[i] = f->data[6 + i];
        f->data[6 + i] = t;
    }
    PW_ADD64(&c->v[1], 1);
}
