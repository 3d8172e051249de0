/* pktwarp ABI: every struct that crosses host <-> GPU, declared once.
 *
 * Mirrored #[repr(C)] in Rust (pipeline::meta, flow_rules::abi, pipeline::executor::gpu::abi);
 * tests on both sides pin sizes and offsets. All integers are little-endian host order (x86-64 and
 * NVIDIA GPUs agree). No pointers: tables are flat arrays addressed by index, so the same bytes are
 * valid in host memory, pinned mapped memory and device memory.
 *
 * This header compiles as C11 (gcc, for the layout check in CI), as CUDA C++ (NVRTC / nvcc) and as
 * C++. Each section has an owner module; edit your own section only.
 */
#ifndef PKTWARP_ABI_H
#define PKTWARP_ABI_H

#if defined(__CUDACC_RTC__)
/* NVRTC has no libc headers. */
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
#define PW_OFFSETOF(t, f) __builtin_offsetof(t, f)
#else
#include <stddef.h>
#include <stdint.h>
#define PW_OFFSETOF(t, f) offsetof(t, f)
#endif

/* Stage code in the gpu-kernels .cuh headers is written once and compiled twice: by NVRTC/nvcc for the GPU,
 * and by the host C++ compiler for the differential tests that hold it equal to the Rust stages
 * in CI (which has no GPU). PW_DEVICE marks functions usable in both. PW_DEVICE_CALL marks large,
 * rarely taken ones (tunnel parsing) that are called, not inlined: inlined at every call site
 * they made the persistent kernel 327 KB of code; calls on the hot path (measured: making the
 * IP / L4 parsers calls too) cost latency, ~0.9 us of a 32-frame burst. */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define PW_DEVICE __device__ __forceinline__
#define PW_DEVICE_CALL __device__ __noinline__
#define PW_GPU 1
#else
#define PW_DEVICE static inline
#define PW_DEVICE_CALL static
#define PW_GPU 0
#endif

#if defined(__CUDACC_RTC__)
/* NVRTC has no offsetof (no <stddef.h>, no __builtin_offsetof), so the layout asserts are left to
 * gcc, nvcc and the Rust layout tests. */
#define PW_STATIC_ASSERT(c, m)
#elif defined(__cplusplus)
#define PW_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define PW_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

/* ========================================================================================
 * Section: stage ABI (owner: pktwarp-kernels codegen, pipeline::stage)
 * Every CUDA stage is one device function of this signature:
 *
 *     PW_DEVICE void NAME(const pw_frame *f, pw_packet_meta *meta, pw_verdict *v,
 *                         const void *params, pw_stage_counters *counters);
 *
 * `f`: the frame's bytes and lengths (read-only, `const pw_frame *`, unless the pipeline rewrites:
 * see pw_frame; a stage that rewrites takes `pw_frame *`, may change `data[0..cap)` and `len`,
 * and sets the output port in `v->out_port`). `meta`: the frame's metadata (filled by `parse`,
 * zero before it). `v`: the verdict so far, starting as pass / PW_DROP_NONE / PW_ACL_NO_MATCH /
 * mark 0 / send_ns 0; a stage that sets action PW_ACTION_DROP ends the frame's pipeline (a user stage that
 * leaves drop_reason PW_DROP_NONE gets PW_DROP_STAGE). `params`: the stage's own parameter block
 * (read-only, published by epoch), or 0. `counters`: the stage's own counter block: v[0] = frames
 * that reached the stage (the generated code counts it), v[1..7] the stage's own, added with
 * PW_ADD64 (a reduction on the GPU, a plain add in the host build). The generated
 * pw_pipeline_frame calls the stages in the config's order; the transport knows only
 * pw_pipeline_frame, and a stage knows nothing of rings, slots or CTAs.
 * ======================================================================================== */
#define PW_STAGE_ABI_VERSION 5u
#define PW_MAX_STAGES 16u
#define PW_STAGE_COUNTERS 8u

typedef struct pw_stage_counters {
    uint64_t v[PW_STAGE_COUNTERS]; /* 0 frames reaching the stage, 1..7 the stage's own */
} pw_stage_counters;
PW_STATIC_ASSERT(sizeof(pw_stage_counters) == 64, "pw_stage_counters size");

/* Device-side only (holds a pointer; never crosses to the host). */
typedef struct pw_frame {
    /* First byte of the frame. Writable only in a pipeline with a stage that rewrites frames
     * (the generated source defines PW_PIPELINE_WRITES): the transport then hands each frame
     * where it lives in its ring slot (mapped host memory or device memory), and the bytes the
     * stages leave there, `len` of them, are what is transmitted. Otherwise it may be a staged
     * copy in shared memory and no stage may write through it. */
    uint8_t *data;
    uint32_t len;          /* captured bytes at data; a rewriting stage may change it, up to cap */
    uint32_t wire_len;     /* bytes on the wire (a rewriting stage that changes len changes it by as much) */
    uint32_t cap;          /* bytes at data the frame may grow into: len + the room the host left after
                            * it in the slot (PW_PIPELINE_WRITES); equal to len otherwise */
    uint16_t port;         /* ingress port */
    uint16_t queue;        /* receive queue */
    uint64_t timestamp_ns; /* receive time (pw_desc.timestamp_ns; 0 for a burst of compact descriptors
                            * or a port that gave none) */
    uint32_t mark;         /* steering mark (pw_desc.mark; 0 = none): `parse` puts it in
                            * pw_packet_meta.steer_mark */
    uint32_t burst_seq;    /* stage ABI 5: the frame's burst, by its sequence number in the queue
                            * (pw_slot_hdr.seq; 0 in the bulk kernel) */
    uint32_t burst_index;  /* stage ABI 5: the frame's index in that burst. (queue, burst_seq,
                            * burst_index) is the frame's arrival position: the frames of a burst
                            * and several bursts of a queue run at once, so a stage that needs
                            * the arrival order (fronthaul's sequence ids) logs it with this */
} pw_frame;

/* Built-in stage counters (pw_stage_counters.v[k]). */
#define PW_PARSE_CTR_ERRORS 1u  /* parse: frames with status != ok (dropped, PW_DROP_PARSE_ERROR) */
#define PW_ACL_CTR_MATCHED 1u   /* acl: frames a rule matched */
#define PW_ACL_CTR_DEFAULT 2u   /* acl: frames that took the default action */
#define PW_COUNT_CTR_BYTES 1u   /* count: captured bytes of the frames counted */

/* ========================================================================================
 * Section: packet metadata (owner: pipeline::meta, stage `parse`)
 * One fixed-size record per frame, filled by the parse stage (Rust and CUDA identically).
 * Offsets are from the first byte of the frame. Absent = 0 unless said otherwise.
 * IP addresses: IPv4 in word [0] (host-order value of the 4 network bytes), words 1..3 zero;
 * IPv6 as 4 words, most significant first, each the host-order value of 4 network bytes.
 * ======================================================================================== */
#define PW_META_SIZE 144u
#define PW_MAX_VLAN 2u     /* tags recorded; more are walked (bounded) and counted */
#define PW_MAX_MPLS 8u     /* labels walked before PW_PARSE_MPLS_TOO_DEEP */
#define PW_MAX_IPV6_EXT 8u /* extension headers walked before PW_PARSE_IPV6_EXT_TOO_MANY */

typedef struct pw_packet_meta {
    uint32_t frame_len;       /*   0 bytes given to parse */
    uint16_t status;          /*   4 enum pw_parse_status (0 = ok) */
    uint16_t flags;           /*   6 PW_MF_* */
    uint16_t ether_type;      /*   8 EtherType after VLAN tags (0x8847 stays for MPLS) */
    uint8_t vlan_count;       /*  10 tags seen (802.1Q / 802.1ad / 0x9100) */
    uint8_t mpls_count;       /*  11 label stack entries seen */
    uint16_t vlan_tci[2];     /*  12 outer, inner TCI (PCP 3 | DEI 1 | VID 12) */
    uint32_t mpls_lse;        /*  16 bottom-most label stack entry walked (label<<12 | tc<<9 | s<<8 | ttl) */
    uint16_t l3_offset;       /*  20 */
    uint16_t l4_offset;       /*  22 0 when no L4 header (later fragment, unknown protocol) */
    uint16_t payload_offset;  /*  24 first byte after the outermost parsed L4 / tunnel header */
    uint16_t error_offset;    /*  26 byte offset where parsing stopped with an error */
    uint8_t ip_version;       /*  28 0, 4 or 6 */
    uint8_t ip_proto;         /*  29 L4 protocol (after the IPv6 extension chain) */
    uint8_t ip_tos;           /*  30 IPv4 TOS / IPv6 traffic class (DSCP = tos >> 2) */
    uint8_t ip_ttl;           /*  31 TTL / hop limit */
    uint32_t src_ip[4];       /*  32 */
    uint32_t dst_ip[4];       /*  48 */
    uint16_t src_port;        /*  64 TCP/UDP/SCTP */
    uint16_t dst_port;        /*  66 */
    uint16_t tcp_flags;       /*  68 9 bits: NS CWR ECE URG ACK PSH RST SYN FIN */
    uint8_t icmp_type;        /*  70 ICMP / ICMPv6 */
    uint8_t icmp_code;        /*  71 */
    uint16_t frag_offset;     /*  72 in 8-byte units */
    uint16_t arp_oper;        /*  74 ARP operation (addresses in src_ip / dst_ip) */
    uint32_t frag_id;         /*  76 IPv4 identification / IPv6 fragment identification */
    uint8_t tunnel_type;      /*  80 enum pw_tunnel_type */
    uint8_t inner_ip_version; /*  81 */
    uint8_t inner_ip_proto;   /*  82 */
    uint8_t ecpri_msg_type;   /*  83 */
    uint32_t tunnel_id;       /*  84 VXLAN VNI / GTP-U TEID */
    uint16_t inner_l3_offset; /*  88 */
    uint16_t inner_l4_offset; /*  90 */
    uint16_t inner_src_port;  /*  92 */
    uint16_t inner_dst_port;  /*  94 */
    uint32_t inner_src_ip[4]; /*  96 */
    uint32_t inner_dst_ip[4]; /* 112 */
    uint16_t ecpri_payload_size; /* 128 */
    uint16_t ecpri_pc_id;     /* 130 PC_ID / eAxC id */
    uint16_t ecpri_seq_id;    /* 132 */
    uint16_t inner_tcp_flags; /* 134 */
    uint8_t ecpri_revision;   /* 136 */
    uint8_t ct_state;         /* 137 conntrack state (0 untracked / none, 1 new, 2 established, 3 related, 4 invalid, 5 closing, 6 closed); parse leaves 0 */
    uint8_t ct_dir;           /* 138 the frame's direction (0 untracked / none, 1 from the flow's originator, 2 reply); set by conntrack with ct_state */
    uint8_t reserved1;        /* 139 */
    uint32_t steer_mark;      /* 140 the steering rule's mark (pw_frame.mark; 0 = none), set by `parse` */
} pw_packet_meta;

PW_STATIC_ASSERT(sizeof(pw_packet_meta) == PW_META_SIZE, "pw_packet_meta size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_packet_meta, src_ip) == 32, "pw_packet_meta.src_ip");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_packet_meta, tunnel_type) == 80, "pw_packet_meta.tunnel_type");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_packet_meta, inner_dst_ip) == 112, "pw_packet_meta.inner_dst_ip");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_packet_meta, ecpri_revision) == 136, "pw_packet_meta.ecpri_revision");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_packet_meta, ct_state) == 137, "pw_packet_meta.ct_state");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_packet_meta, ct_dir) == 138, "pw_packet_meta.ct_dir");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_packet_meta, steer_mark) == 140, "pw_packet_meta.steer_mark");

/* PW_MF_* flags and enum pw_parse_status / pw_tunnel_type values: defined by the parse owner below. */
/* ---- parse constants (owner: stage `parse`; Rust mirror: pipeline::meta::{mf, ParseStatus,
 * TunnelType}). Values are stable: they are stored in pw_packet_meta and shown by `pktwarp parse`.
 *
 * Semantics shared by pipeline::stage::parse and gpu-kernels/parse.cuh (see parse.rs for the full
 * rules):
 *  - A layer's fields are filled once its own header is intact (fits, sane version and header
 *    length); a layer whose header is broken leaves its fields 0 and sets status/error_offset.
 *  - An IPv4 total length / IPv6 payload length that runs past the bytes present is an error
 *    (PW_PARSE_*_LEN_EXCEEDS_FRAME) reported after the IP fields are filled; bytes after the IP
 *    packet are Ethernet padding / trailer: fine, PW_MF_PADDED. L4 is bounded by the IP packet.
 *  - error_offset: the offending field for a bad field value, else the start of the header that
 *    does not fit.
 *  - payload_offset: first byte after the last header parsed (L4, tunnel, eCPRI common header,
 *    ARP, or the IP header + extensions when there is no L4).
 *  - Errors in the tunnelled (inner) packet: the same code | PW_PARSE_INNER; outer fields stay.
 */
#define PW_MAX_VLAN_WALK 8u /* tags walked before PW_PARSE_VLAN_TOO_MANY */
#define PW_MAX_GTPU_EXT 4u  /* GTP-U extension headers walked before PW_PARSE_GTPU_BAD_EXT */
#define PW_UDP_PORT_VXLAN 4789u
#define PW_UDP_PORT_GTPU 2152u

/* pw_packet_meta.flags */
#define PW_MF_VLAN 0x0001u           /* at least one VLAN tag */
#define PW_MF_VLAN_EXTRA 0x0002u     /* more than PW_MAX_VLAN tags: walked, only two recorded */
#define PW_MF_MPLS 0x0004u           /* MPLS label stack */
#define PW_MF_ARP 0x0008u            /* ARP packet */
#define PW_MF_IP_OPTIONS 0x0010u     /* IPv4 options or IPv6 extension headers present */
#define PW_MF_FRAGMENT 0x0020u       /* IP fragment (more-fragments set or offset != 0) */
#define PW_MF_MORE_FRAGMENTS 0x0040u /* more-fragments bit set */
#define PW_MF_LATER_FRAGMENT 0x0080u /* fragment offset != 0: no L4 header in this frame */
#define PW_MF_L4 0x0100u             /* outer TCP / UDP / SCTP / ICMP / ICMPv6 header parsed */
#define PW_MF_TUNNEL 0x0200u         /* VXLAN or GTP-U header parsed (tunnel_type, tunnel_id) */
#define PW_MF_INNER_L4 0x0400u       /* inner TCP / UDP / SCTP / ICMP / ICMPv6 header parsed */
#define PW_MF_INNER_FRAGMENT 0x0800u /* inner IP packet is a fragment */
#define PW_MF_ECPRI 0x1000u          /* eCPRI common header parsed */
#define PW_MF_PADDED 0x2000u         /* bytes after the outer IP packet (Ethernet padding) */
#define PW_MF_LLC 0x4000u            /* 802.3 length field instead of an EtherType (ether_type < 0x600) */

/* pw_packet_meta.status */
enum pw_parse_status {
    PW_PARSE_OK = 0,
    PW_PARSE_ETH_TRUNCATED = 1,         /* frame < 14 bytes */
    PW_PARSE_VLAN_TRUNCATED = 2,        /* VLAN tag cut */
    PW_PARSE_VLAN_TOO_MANY = 3,         /* more than PW_MAX_VLAN_WALK tags */
    PW_PARSE_ARP_TRUNCATED = 4,         /* ARP fixed part or addresses cut */
    PW_PARSE_MPLS_TRUNCATED = 5,        /* label stack entry cut */
    PW_PARSE_MPLS_TOO_DEEP = 6,         /* no bottom of stack within PW_MAX_MPLS labels */
    PW_PARSE_IPV4_TRUNCATED = 7,        /* IPv4 header (with options) cut */
    PW_PARSE_IPV4_BAD_VERSION = 8,      /* version nibble != 4 */
    PW_PARSE_IPV4_BAD_IHL = 9,          /* IHL < 5 */
    PW_PARSE_IPV4_BAD_TOTAL_LEN = 10,   /* total length < IHL * 4 */
    PW_PARSE_IPV4_LEN_EXCEEDS_FRAME = 11, /* total length runs past the frame (or tunnel) */
    PW_PARSE_IPV6_TRUNCATED = 12,       /* fixed header cut */
    PW_PARSE_IPV6_BAD_VERSION = 13,     /* version nibble != 6 */
    PW_PARSE_IPV6_LEN_EXCEEDS_FRAME = 14, /* payload length runs past the frame (or tunnel) */
    PW_PARSE_IPV6_EXT_TRUNCATED = 15,   /* extension header cut (within the IPv6 payload) */
    PW_PARSE_IPV6_EXT_TOO_MANY = 16,    /* more than PW_MAX_IPV6_EXT extension headers */
    PW_PARSE_TCP_TRUNCATED = 17,        /* TCP header (with options) cut */
    PW_PARSE_TCP_BAD_DATA_OFFSET = 18,  /* data offset < 5 */
    PW_PARSE_UDP_TRUNCATED = 19,        /* UDP header cut */
    PW_PARSE_UDP_BAD_LENGTH = 20,       /* UDP length < 8 or past the IP packet (not for fragments) */
    PW_PARSE_ICMP_TRUNCATED = 21,       /* ICMP header (8 bytes) cut */
    PW_PARSE_ICMPV6_TRUNCATED = 22,     /* ICMPv6 header (8 bytes) cut */
    PW_PARSE_SCTP_TRUNCATED = 23,       /* SCTP common header (12 bytes) cut */
    PW_PARSE_VXLAN_TRUNCATED = 24,      /* VXLAN header cut */
    PW_PARSE_GTPU_TRUNCATED = 25,       /* GTP-U header, optional fields or extension cut */
    PW_PARSE_GTPU_BAD_HEADER = 26,      /* version != 1 or protocol type != GTP */
    PW_PARSE_GTPU_BAD_LENGTH = 27,      /* GTP length field past the UDP payload */
    PW_PARSE_GTPU_BAD_EXT = 28,         /* extension length 0 or more than PW_MAX_GTPU_EXT */
    PW_PARSE_ECPRI_TRUNCATED = 29,      /* eCPRI common header cut */
    PW_PARSE_ECPRI_LEN_EXCEEDS_FRAME = 30, /* payload size runs past the frame */
    PW_PARSE_INNER = 0x40               /* OR-ed onto codes 1..23: the error is in the inner packet */
};

/* pw_packet_meta.tunnel_type */
enum pw_tunnel_type {
    PW_TUNNEL_NONE = 0,
    PW_TUNNEL_VXLAN = 1, /* UDP dst 4789; tunnel_id = VNI */
    PW_TUNNEL_GTPU = 2   /* UDP dst 2152; tunnel_id = TEID */
};

/* ========================================================================================
 * Section: ACL classification (owner: flow_rules::abi, stage `acl`)
 * The key is built from the packet metadata and the RX descriptor; the flat tables follow.
 * ======================================================================================== */
#define PW_ACL_NO_MATCH 0xFFFFFFFFu
#define PW_VLAN_NONE 0xFFFFu

typedef struct pw_acl_key {
    uint32_t src_ip[4];  /*  0 same encoding as pw_packet_meta */
    uint32_t dst_ip[4];  /* 16 */
    uint16_t src_port;   /* 32 */
    uint16_t dst_port;   /* 34 */
    uint8_t proto;       /* 36 */
    uint8_t ip_version;  /* 37 0 (not IP), 4, 6 */
    uint8_t dscp;        /* 38 */
    uint8_t tcp_flags;   /* 39 low 8 TCP flag bits */
    uint16_t vlan_id;    /* 40 outer VID, PW_VLAN_NONE when untagged */
    uint16_t port_id;    /* 42 ingress port */
} pw_acl_key;

PW_STATIC_ASSERT(sizeof(pw_acl_key) == 44, "pw_acl_key size");

/* ACL flat tables (flow_rules::acl::compile; Rust mirror flow_rules::abi::AclTablesHeader).
 *
 * The compiled classifier is ONE array of uint32_t, the "image", that starts with pw_acl_tables.
 * Every offset below is an index in 32-bit words from the start of the image: no pointers, so the
 * image is copied to device memory as-is and used in place.
 *
 *   pw_acl_tables (32 words) | per family: trees, nodes, records | extras | actions
 *
 * Three families: fam[PW_ACL_FAM_V4] for ip_version 4 keys, [PW_ACL_FAM_V6] for 6, [PW_ACL_FAM_L2]
 * for any other key (only rules with no L3/L4 condition live there). Each family is a forest of
 * decision trees; a rule is stored in exactly one tree, once.
 *
 * Key words kw[0..10] (the key as the trees index it):
 *   kw[0..3] src_ip, kw[4..7] dst_ip, kw[8] = src_port | dst_port << 16,
 *   kw[9] = proto | ip_version << 8 | dscp << 16 | tcp_flags << 24, kw[10] = vlan_id | port_id << 16.
 * Trees: num_trees pairs [root_ref, min_rule] at trees_off, sorted by min_rule (the best rule
 *   index in that tree): a lookup stops when min_rule >= the best match so far.
 * Ref (a tree root or a node child): PW_ACL_REF_EMPTY = no rule; bit 31 set = leaf whose first
 *   record is record number (ref & 0x7FFFFFFF); else the word offset of an internal node.
 * Internal node: word 0 = kw_index (bits 0-3) | shift (bits 8-12) | nbits (bits 16-19), then
 *   2^nbits child refs; the child taken is (kw[kw_index] >> shift) & (2^nbits - 1).
 * Record (rec_words = 4 * addr_words + 4 words; addr_words 1 for V4/L2, 4 for V6), record n at
 *   records_off + n * rec_words: src_val[aw], src_mask[aw], dst_val[aw], dst_mask[aw],
 *   sport_lo | sport_hi << 16, dport_lo | dport_hi << 16,
 *   ctl = proto_val | proto_mask << 8 | PW_ACL_REC_LAST | PW_ACL_REC_EXTRA, rule index.
 *   Matches when (kw_src & mask) == val per word (likewise dst), lo <= port <= hi,
 *   (proto & proto_mask) == proto_val and, when PW_ACL_REC_EXTRA, the extras match. A leaf's
 *   records are sorted by rule index; PW_ACL_REC_LAST marks its last one.
 * Extras (only when extras_off != 0), 3 words per rule at extras_off + 3 * rule:
 *   dscp_val | dscp_mask << 8 | tflags_val << 16 | tflags_mask << 24, vlan_val | vlan_mask << 16,
 *   port_val | port_mask << 16; each field matches when (key & mask) == val.
 * Actions, 2 words per rule at actions_off + 2 * rule: verdict (0 pass, 1 drop, 2 mirror,
 *   3 to-host) | has_mark << 8, mark id.
 * Rewrites (only when rewrites_off != 0: a rule with `set:`), 3 words per rule at
 *   rewrites_off + 3 * rule: flags (PW_ACL_RW_*) | dscp << 8 | out_port << 16, dst MAC bytes 0..3,
 *   bytes 4..5 (little-endian in their words); flags 0 = the rule rewrites nothing
 *   (flow_rules::acl::rewrite). Applied by pw_stage_acl_rw when the verdict is not drop. */
#define PW_ACL_MAGIC 0x43415750u /* "PWAC" */
#define PW_ACL_VERSION 1u
#define PW_ACL_FAM_V4 0u
#define PW_ACL_FAM_V6 1u
#define PW_ACL_FAM_L2 2u
#define PW_ACL_REF_EMPTY 0xFFFFFFFFu
#define PW_ACL_REF_LEAF 0x80000000u
#define PW_ACL_REC_LAST (1u << 16)
#define PW_ACL_REC_EXTRA (1u << 17)
#define PW_ACL_EXTRA_WORDS 3u
#define PW_ACL_ACTION_WORDS 2u
#define PW_ACL_REWRITE_WORDS 3u
#define PW_ACL_RW_DSCP 1u
#define PW_ACL_RW_DST_MAC 2u
#define PW_ACL_RW_PORT 4u
#define PW_ACL_VERDICT_PASS 0u
#define PW_ACL_VERDICT_DROP 1u
#define PW_ACL_VERDICT_MIRROR 2u
#define PW_ACL_VERDICT_TO_HOST 3u

typedef struct pw_acl_family {
    uint32_t addr_words;  /*  0 */
    uint32_t rec_words;   /*  4 */
    uint32_t num_trees;   /*  8 */
    uint32_t trees_off;   /* 12 */
    uint32_t records_off; /* 16 */
    uint32_t num_records; /* 20 */
    uint32_t num_nodes;   /* 24 */
    uint32_t reserved;    /* 28 */
} pw_acl_family;

typedef struct pw_acl_tables {
    uint32_t magic;       /*  0 PW_ACL_MAGIC */
    uint32_t version;     /*  4 PW_ACL_VERSION */
    uint32_t num_rules;   /*  8 */
    uint32_t total_words; /* 12 image size, header included */
    uint32_t extras_off;  /* 16 0 = no rule uses DSCP / TCP flags / VLAN / ingress port */
    uint32_t actions_off; /* 20 */
    uint32_t rewrites_off; /* 24 0 = no rule rewrites */
    uint32_t reserved;    /* 28 */
    pw_acl_family fam[3]; /* 32 */
} pw_acl_tables;

/* A rule set with `ct:` rules: one classifier per connection state (flow_rules::acl::ct,
 * CtClassifiers::gpu_image), picked by pw_packet_meta.ct_state (a state past the last one is
 * `invalid`, 4). The composed acl stage reads it (cuda/stages.cuh); its rule numbers are the
 * file's, through each state's index map. */
#define PW_ACL_CT_MAGIC 0x54435750u /* "PWCT" */
#define PW_ACL_CT_STATES 7u
typedef struct pw_acl_ct_image {
    uint32_t magic;                       /*  0 PW_ACL_CT_MAGIC */
    uint32_t version;                     /*  4 PW_ACL_VERSION */
    uint32_t num_rules;                   /*  8 the file's */
    uint32_t total_words;                 /* 12 */
    uint32_t image_off[PW_ACL_CT_STATES]; /* 16 word offset of each state's pw_acl_tables image */
    uint32_t map_off[PW_ACL_CT_STATES];   /* 44 word offset of each state's rule -> file rule map */
    uint32_t reserved[14];                /* 72 */
} pw_acl_ct_image;

PW_STATIC_ASSERT(sizeof(pw_acl_ct_image) == 128, "pw_acl_ct_image size");
PW_STATIC_ASSERT(sizeof(pw_acl_family) == 32, "pw_acl_family size");
PW_STATIC_ASSERT(sizeof(pw_acl_tables) == 128, "pw_acl_tables size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_acl_tables, actions_off) == 20, "pw_acl_tables.actions_off");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_acl_tables, rewrites_off) == 24, "pw_acl_tables.rewrites_off");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_acl_tables, fam) == 32, "pw_acl_tables.fam");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_acl_family, records_off) == 16, "pw_acl_family.records_off");
/* acl.cuh's pw_acl_view loads these as vectors: {addr_words, rec_words, num_trees, trees_off},
 * {records_off, num_records, ..} and {extras_off, actions_off}. */
PW_STATIC_ASSERT(PW_OFFSETOF(pw_acl_family, num_trees) == 8, "pw_acl_family.num_trees");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_acl_family, trees_off) == 12, "pw_acl_family.trees_off");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_acl_family, num_records) == 20, "pw_acl_family.num_records");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_acl_tables, extras_off) == 16, "pw_acl_tables.extras_off");

/* ========================================================================================
 * Section: queues, descriptors, verdicts, counters (owner: pipeline::executor::gpu)
 * ======================================================================================== */
/* @@gpu-queues@@
 * A queue is a ring of `slots` burst slots. Slot layout (one contiguous region per slot, in device
 * memory or in mapped pinned host memory as the queue's placement says):
 *   pw_slot_hdr | descriptors (pw_desc[n], or pw_desc8[n] when the header's desc_format is
 *   PW_DESC_COMPACT) | frame bytes at data_offset (data_bytes, packed, offsets in the descriptors)
 * The host (or a GPUDirect NIC) fills slot (seq % slots) and then publishes producer = seq + 1;
 * a queue is served by `ctas` groups of `parts` CTAs (group j takes bursts j, j + ctas, ...; CTA
 * p of a group runs its share of the burst's frames), which write one pw_verdict per frame (and
 * the metadata when asked) into host-visible memory, then, after a release store,
 * done[slot * parts + p] = seq + 1. The host reads bursts back in order, once every part is done.
 * Indices are free-running 32-bit counts of bursts (wrap-safe: compare by difference). */
#define PW_GPU_MAX_BURST 1024u /* frames per burst, at most */
#define PW_SLOT_ALIGN 256u     /* every slot and its data area start on this boundary */
#define PW_CTRL_SIZE 256u

/* One frame in a slot (mirrors pipeline::burst::FrameDesc; offset is from the slot's data area). */
typedef struct pw_desc {
    uint32_t offset;       /*  0 */
    uint32_t len;          /*  4 captured length */
    uint32_t wire_len;     /*  8 */
    uint16_t port;         /* 12 ingress port */
    uint16_t queue;        /* 14 */
    uint32_t rss_hash;     /* 16 */
    uint32_t mark;         /* 20 steering mark (FrameDesc::mark, 0 = none) */
    uint64_t timestamp_ns; /* 24 */
} pw_desc;
PW_STATIC_ASSERT(sizeof(pw_desc) == 32, "pw_desc size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_desc, mark) == 20, "pw_desc.mark");

/* Compact descriptor: the host uses it for a burst whose every frame has wire_len == len <= 65535,
 * port <= 255 and no steering mark (all the GPU stages read; queue, rss_hash and timestamp stay on
 * the host).
 * Throughput: a 60-byte frame with a pw_desc is 92 bytes across PCIe, with a pw_desc8 68. */
typedef struct pw_desc8 {
    uint32_t offset; /* 0 from the slot's data area */
    uint16_t len;    /* 4 captured length = wire length */
    uint8_t port;    /* 6 ingress port */
    uint8_t reserved;
} pw_desc8;
PW_STATIC_ASSERT(sizeof(pw_desc8) == 8, "pw_desc8 size");
#define PW_DESC_FULL 0u    /* pw_slot_hdr.desc_format: pw_desc */
#define PW_DESC_COMPACT 1u /* pw_slot_hdr.desc_format: pw_desc8 */

/* The ACL table a burst is classified with travels in its slot header, written by the host at
 * submit (table hot swap): every frame of a burst sees one table, and a new table is picked up at
 * the next burst without touching the running kernel. The host uploads each new image to a fresh
 * device buffer before any burst names it and frees an old one only after every queue has reaped
 * past the last burst that named it. acl_tables == 0: use pw_queue_desc.acl_tables / rule_hits /
 * n_rules / default_action (no acl stage, or the bulk kernel). */
typedef struct pw_slot_hdr {
    uint16_t n_frames;      /*  0 */
    uint8_t desc_format;    /*  2 PW_DESC_FULL or PW_DESC_COMPACT (in the first 16 bytes: a
                             *    mapped ring's poller knows the burst's size from them) */
    uint8_t flags;          /*  3 PW_SLOT_* */
    uint32_t data_bytes;    /*  4 */
    uint32_t seq;           /*  8 burst sequence number (its producer index before publish) */
    uint32_t generation;    /* 12 rule-set generation of acl_tables (low 32 bits) */
    uint64_t acl_tables;    /* 16 device address of the ACL image for this burst, or 0 */
    uint64_t rule_hits;     /* 24 uint64_t[n_rules] hit counters of that image (device), or 0 */
    uint32_t n_rules;       /* 32 entries of rule_hits */
    uint8_t default_action; /* 36 action when no rule of that image matches */
    uint8_t reserved1;      /* 37 */
    uint16_t reserved2;     /* 38 */
    uint64_t stage_params;  /* 40 uint64_t[PW_MAX_STAGES] parameter-block addresses for this burst (device;
                             *    published by epoch with the ACL image), or 0: pw_queue_desc.stage_params */
} pw_slot_hdr;
PW_STATIC_ASSERT(sizeof(pw_slot_hdr) == 48, "pw_slot_hdr size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_slot_hdr, acl_tables) == 16, "pw_slot_hdr.acl_tables");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_slot_hdr, default_action) == 36, "pw_slot_hdr.default_action");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_slot_hdr, desc_format) == 2, "pw_slot_hdr.desc_format");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_slot_hdr, data_bytes) == 4, "pw_slot_hdr.data_bytes");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_slot_hdr, flags) == 3, "pw_slot_hdr.flags");
/* pw_slot_hdr.flags: the burst's frames are not in the slot (a `mapped` ring only; untagged, no
 * TX ring, no stage that rewrites): its data area holds one uint64_t, the device address of
 * frames loaded once into pinned host memory the GPU reads (a capture, a generator's frame pool),
 * and each descriptor's offset is from that address. The stages read each frame there, in place
 * (the memory never changes while a burst names it). */
#define PW_SLOT_REFS 1u

/* Verdict actions and drop reasons (pw_verdict.action / .drop_reason, counter indices). */
#define PW_ACTION_PASS 0u
#define PW_ACTION_DROP 1u
#define PW_ACTION_MIRROR 2u
#define PW_ACTION_TO_HOST 3u
#define PW_ACTIONS 4u

/* Drop reasons: the same codes as pipeline::verdict::DropReason (CPU executor). */
#define PW_DROP_RING_FULL 0u   /* counted by the host when a burst finds the ring full */
#define PW_DROP_PARSE_ERROR 1u /* parse status != ok (the parse stage drops malformed frames) */
#define PW_DROP_ACL 2u         /* an ACL rule, or the ACL default, said drop */
#define PW_DROP_STEERING 3u    /* steering said drop (host side) */
#define PW_DROP_TX_ERROR 4u    /* the output port refused the frame (host side) */
#define PW_DROP_TOO_LONG 5u    /* frame larger than a ring slot (host side), or a vlan push without room */
#define PW_DROP_STAGE 6u       /* a user stage dropped the frame without naming another reason */
#define PW_DROP_TTL_EXPIRED 7u /* ttl: IPv4 TTL / IPv6 hop limit 0 or 1 on arrival */
#define PW_DROP_NO_ROUTE 8u    /* route: no covering prefix (and no default route), or no IP destination */
#define PW_DROP_KERNEL_STALL 9u /* the burst a stalled queue kernel held when it was restarted (host side) */
#define PW_DROP_FRONTHAUL 10u  /* fronthaul: a malformed eCPRI / O-RAN frame, rejected whole, or one whose slot closed */
#define PW_DROP_NONE 0xFFu     /* pw_verdict.drop_reason when the action is not drop */
#define PW_DROP_REASONS 11u    /* counter slots: codes 0..10 (append-only numbering); code 11, tx_horizon
                                * (a send time beyond what the output port holds), is counted by the
                                * host alone and has no slot here */
#define PW_OUT_DEFAULT 0xFFFFu /* pw_verdict.reserved (output port): the default output port */

/* A frame's verdict as the stages see it (stage ABI). */
typedef struct pw_verdict {
    uint8_t action;      /*  0 PW_ACTION_* */
    uint8_t drop_reason; /*  1 PW_DROP_* (PW_DROP_NONE unless action is drop) */
    uint16_t out_port;   /*  2 output port: an index of the config's ports with a transmit side, in config
                          *    order (CPU: pipeline::verdict::Verdict::out_port), PW_OUT_DEFAULT = the
                          *    default output; `route` and `respond` set it */
    uint32_t rule;       /*  4 matched ACL rule index, PW_ACL_NO_MATCH when none or no acl stage */
    uint32_t mark;       /*  8 mark set by the matched rule, 0 when none */
    uint32_t reserved;   /* 12 */
    uint64_t send_ns;    /* 16 when to send the frame, ns in the clock of pw_frame.timestamp_ns; 0 = now
                          *    (stage ABI 4; `tx_time` sets it). It travels in the TX ring
                          *    (PW_TX_TIMES) of a PW_PIPELINE_TIMED pipeline (one with `tx_time`),
                          *    not in pw_verdict_out. */
} pw_verdict;
PW_STATIC_ASSERT(sizeof(pw_verdict) == 24, "pw_verdict size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_verdict, send_ns) == 16, "pw_verdict.send_ns");

/* The part of a verdict that goes back to the host for every frame (pw_queue_desc.verdicts; Rust
 * executor::gpu::abi::Verdict): pw_verdict's first 12 bytes. The send time stays out of it: the
 * frames that are sent carry theirs in the TX ring, and 12 bytes a frame are what every burst
 * writes across PCIe. */
typedef struct pw_verdict_out {
    uint8_t action;      /* 0 */
    uint8_t drop_reason; /* 1 */
    uint16_t out_port;   /* 2 */
    uint32_t rule;       /* 4 */
    uint32_t mark;       /* 8 */
} pw_verdict_out;
PW_STATIC_ASSERT(sizeof(pw_verdict_out) == 12, "pw_verdict_out size");

/* A verdict in a PW_PIPE_TAGGED queue: pw_verdict's three words, each beside the burst's tag
 * (seq + 1) in one 8-byte word the GPU stores at once; the host takes the verdict once all three
 * tags are its burst's, with no done word and no fence on the GPU. */
typedef struct pw_verdict_tagged {
    uint32_t head;  /*  0 action | drop_reason << 8 | reserved << 16 */
    uint32_t tag0;  /*  4 */
    uint32_t rule;  /*  8 */
    uint32_t tag1;  /* 12 */
    uint32_t mark;  /* 16 */
    uint32_t tag2;  /* 20 */
} pw_verdict_tagged;
PW_STATIC_ASSERT(sizeof(pw_verdict_tagged) == 24, "pw_verdict_tagged size");

/* Per-queue counters, written by the count stage (device memory, read by the host with a copy). */
typedef struct pw_queue_counters {
    uint64_t bursts;                       /*   0 */
    uint64_t packets;                      /*   8 */
    uint64_t bytes;                        /*  16 wire bytes */
    uint64_t parse_errors;                 /*  24 frames with parse status != ok */
    uint64_t acl_matched;                  /*  32 frames a rule matched */
    uint64_t acl_no_match;                 /*  40 frames that took the ACL default */
    uint64_t action[PW_ACTIONS];           /*  48 */
    uint64_t drop_reason[PW_DROP_REASONS]; /*  80 */
} pw_queue_counters;
PW_STATIC_ASSERT(sizeof(pw_queue_counters) == 168, "pw_queue_counters size");

/* Queue state word (pw_queue_ctrl.status). */
#define PW_QSTATE_IDLE 0u         /* kernel not started */
#define PW_QSTATE_RUNNING 1u
#define PW_QSTATE_EXIT_FLAG 2u    /* exited because the host set exit_flag */
#define PW_QSTATE_EXIT_TIMEOUT 3u /* exited after idle_timeout_ns without a burst (last resort) */
#define PW_QSTATE_BAD_SLOT 4u     /* a slot header was inconsistent (n_frames > burst_max): stopped */

/* Per-queue control block in mapped pinned host memory. Host-written and GPU-written words sit
 * in different 128-byte lines so neither side's polling pulls the other's line back and forth. */
typedef struct pw_queue_ctrl {
    uint32_t producer;  /*   0 producer index for `mapped` placement (host writes) */
    uint32_t exit_flag; /*   4 host sets 1: the persistent kernel returns */
    uint32_t first_seq; /*   8 host: the burst the persistent kernel starts at (0; after a restart the one
                         *     after the burst that was lost) */
    uint32_t stall_at;  /*  12 test only (executor.gpu.test_stall): seq + 1 of a burst the persistent
                         *     kernel takes and never finishes, beating no more until exit_flag (0: none) */
    uint32_t exited;    /*  16 the queue's persistent CTAs that have returned (each adds 1) */
    uint32_t pad0[27];  /*  20 */
    uint32_t consumer;  /* 128 last burst done + 1 (GPU writes; informational, done[] is the handshake) */
    uint32_t heartbeat; /* 132 written by the GPU on every burst and every 2^16 empty polls: the writing
                         *     CTA's count (persistent; never read back), seq + 1 (burst kernels) */
    uint32_t status;    /* 136 PW_QSTATE_* */
    uint32_t pad1;      /* 140 */
    uint64_t polls;     /* 144 empty polls (load indicator) */
    uint32_t pad2[26];  /* 152 */
} pw_queue_ctrl;
PW_STATIC_ASSERT(sizeof(pw_queue_ctrl) == PW_CTRL_SIZE, "pw_queue_ctrl size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_queue_ctrl, consumer) == 128, "pw_queue_ctrl.consumer");

/* Pipeline flags (pw_queue_desc.pipeline). */
#define PW_PIPE_PARSE 1u
#define PW_PIPE_ACL 2u
#define PW_PIPE_COUNT 4u
#define PW_PIPE_META_OUT 8u   /* write every frame's pw_packet_meta to `metas` (verify) */
#define PW_PIPE_DROP_MALFORMED 16u /* frames with parse status != ok are dropped before the ACL */
/* The persistent kernel polls the slot header's first 16 bytes (n_frames, data_bytes, seq,
 * generation) for seq instead of the producer index: set for `mapped` rings, whose host writes the
 * rest of the slot, a release fence, then those 16 bytes in one aligned 16-byte store (atomic on
 * x86-64 with AVX; the GPU reads them with one 16-byte load). One PCIe round trip (the poll) then
 * says both "ready" and the burst's size, so the slot is staged in one more round trip instead of
 * two (producer index, then header, then the rest). */
#define PW_PIPE_SLOT_SEQ 32u
/* Tagged words both ways (a persistent kernel's `mapped` ring whose burst image fits
 * PW_STAGE_BYTES). The slot holds the burst's image (pw_slot_hdr, its descriptors padded to 16
 * bytes, its frame data padded to 16 bytes: the layout the kernel stages) as 16-byte granules
 * {p0, p1, p2, tag}, (p0, p1, p2) the image's next 12 bytes and tag = seq + 1, each granule
 * stored at once by the host (an aligned 16-byte store: atomic on x86-64 with AVX, which tagged
 * queues require; the GPU reads a granule with one 16-byte load). The whole CTA polls the slot:
 * when every granule the image needs
 * carries the tag, the burst is in shared memory, one PCIe round trip after the host's stores
 * instead of two (the poll, then the copy). Verdicts go back as pw_verdict_tagged, so the host
 * sees a burst finished without a done word behind a system-scope fence (which waits for the
 * verdict writes to drain). The done word is still written for a burst of no frames and with
 * PW_PIPE_META_OUT (metadata is not tagged). Costs 4/3 of the slot bytes across PCIe: for small
 * bursts (latency), not throughput. */
#define PW_PIPE_TAGGED 64u
/* Payload bytes of a tagged granule. */
#define PW_TAG_PAYLOAD 12u
/* Bytes of a burst the kernel stages in shared memory (the image's limit in a tagged queue). */
#define PW_STAGE_BYTES 24576u
/* Most frames of a block's share of a burst whose keys the two-pass path (parse all, then the
 * groups' lookups) keeps in shared memory; the host picks pw_persistent_small only for bursts of
 * at most this many frames. */
#define PW_SPLIT_MAX 64u

/* Everything a kernel needs to run one queue; an array of these lives in device memory. Addresses
 * are device addresses (of device memory or of mapped host memory) stored as integers. */
typedef struct pw_queue_desc {
    uint64_t ring;            /*   0 slot 0 */
    uint64_t producer;        /*   8 uint32 producer index (device memory or &ctrl->producer) */
    uint64_t ctrl;            /*  16 pw_queue_ctrl (mapped) */
    uint64_t verdicts;        /*  24 pw_verdict_out[slots * burst_max] (mapped) */
    uint64_t metas;           /*  32 pw_packet_meta[slots * burst_max] (mapped) or 0 */
    uint64_t counters;        /*  40 pw_queue_counters[ctas] (device memory): one per serving CTA */
    uint64_t rule_hits;       /*  48 uint64_t[n_rules] (device) or 0; ring bursts use pw_slot_hdr's */
    uint64_t acl_tables;      /*  56 flat ACL table bytes (device) or 0; ring bursts use pw_slot_hdr's (hot swap) */
    uint64_t idle_timeout_ns; /*  64 bounded wait of the persistent kernel */
    uint32_t slots;           /*  72 */
    uint32_t burst_max;       /*  76 */
    uint32_t slot_bytes;      /*  80 whole slot, header + descriptors + data */
    uint32_t data_offset;     /*  84 start of the data area in a slot */
    uint32_t pipeline;        /*  88 PW_PIPE_* */
    uint32_t n_rules;         /*  92 entries of rule_hits */
    uint8_t default_action;   /*  96 action when no rule matches (the ACL table's default) */
    uint8_t port_id;          /*  97 */
    uint16_t queue_id;        /*  98 */
    uint32_t ctas;            /* 100 persistent CTAs serving this queue (CTA j takes bursts j, j+ctas, ...) */
    uint64_t done;            /* 104 uint32 done[slots * parts] (mapped): seq + 1 once burst seq's verdicts are written
                               *     (part j of the burst's CTA group writes done[slot * parts + j]; parts = 1
                               *     except in the persistent kernel, see pw_persistent) */
    uint64_t trace;           /* 112 pw_burst_trace[slots] (mapped) or 0: per-burst timestamps */
    uint64_t stage_counters;  /* 120 pw_stage_counters[PW_MAX_STAGES] (device) of the queue, or 0 (fused
                               *     template: its stages count in pw_queue_counters) */
    uint64_t stage_params;    /* 128 uint64_t[PW_MAX_STAGES] (device): each stage's parameter block
                               *     address (0: none); ring bursts use pw_slot_hdr.stage_params when set */
    uint64_t tx;              /* 136 pw_tx_desc[slots * burst_max] (mapped): the TX ring, or 0 (composed
                               *     template only; see pw_tx_desc) */
    uint64_t tx_counts;       /* 144 uint32 tx_counts[slots * parts] (mapped): PW_TX_COUNT words */
    uint32_t frame_room;      /* 152 bytes the host leaves after every frame of a slot (pw_frame.cap =
                               *     len + frame_room in a PW_PIPELINE_WRITES pipeline) */
    uint32_t reserved3;       /* 156 */
} pw_queue_desc;
PW_STATIC_ASSERT(sizeof(pw_queue_desc) == 160, "pw_queue_desc size");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_queue_desc, tx) == 136, "pw_queue_desc.tx");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_queue_desc, frame_room) == 152, "pw_queue_desc.frame_room");

/* The TX ring (GPU-initiated transmit): for every burst, CTA `part` of its group writes one
 * descriptor per frame of its share [lo, hi) that is not dropped, in frame order, at
 * tx[slot * burst_max + lo ...], and then tx_counts[slot * parts + part] = PW_TX_COUNT(lo, n),
 * both before the burst's done word (ordered by its release store). The output port drains it
 * without reading verdicts: parts in order, each part's descriptors in order, each naming its
 * bytes in the slot's data area as the stages left them (a rewriting pipeline runs frames in
 * place there) and the port to send them to. */
typedef struct pw_tx_desc {
    uint32_t offset;   /*  0 the frame's first byte, from the slot's data area */
    uint32_t len;      /*  4 bytes to send (the frame's len after the stages) */
    uint16_t frame;    /*  8 the frame's index in its burst */
    uint16_t out_port; /* 10 pw_verdict.out_port */
    uint8_t action;    /* 12 PW_ACTION_PASS, _MIRROR or _TO_HOST */
    uint8_t reserved0; /* 13 */
    uint16_t reserved1; /* 14 */
} pw_tx_desc;
PW_STATIC_ASSERT(sizeof(pw_tx_desc) == 16, "pw_tx_desc size");
/* Send times (stage ABI 4): in a pipeline with a stage that sets them (the generated source defines
 * PW_PIPELINE_TIMED), the TX ring's buffer holds, after its slots * burst_max descriptors, one
 * uint64_t per descriptor at the same index: its frame's pw_verdict.send_ns (0 = now), which the
 * port honours (pcap: the record time; DPDK: Tx timestamp offload or software pacing). Kept apart so
 * that every other pipeline's descriptors stay 16 bytes a frame across PCIe. */
#define PW_TX_TIMES(q) ((uint64_t *)((q).tx + (uint64_t)(q).slots * (q).burst_max * sizeof(pw_tx_desc)))
/* A tx_counts word: the part's first frame (its descriptors start at that index) and how many
 * descriptors it wrote. */
#define PW_TX_COUNT(lo, n) ((uint32_t)(lo) | ((uint32_t)(n) << 16))
PW_STATIC_ASSERT(PW_OFFSETOF(pw_queue_desc, trace) == 112, "pw_queue_desc.trace");
PW_STATIC_ASSERT(PW_OFFSETOF(pw_queue_desc, stage_params) == 128, "pw_queue_desc.stage_params");

/* Where a burst's time goes on the GPU (latency analysis; written only when the queue has a trace
 * buffer): %globaltimer (ns) at each step, one record per slot, written before the burst's done
 * word (ordered by its release store; `merged`, written after done, by the CTA's next one). The
 * host reads burst k's record once it has reaped burst k + ctas, and before the slot's next lap
 * rewrites it. */
typedef struct pw_burst_trace {
    uint64_t seq;    /*  0 burst sequence number + 1 (0: never written) */
    uint64_t seen;   /*  8 the kernel saw the burst (persistent: its producer index; else kernel start) */
    uint64_t staged; /* 16 slot header, descriptors and frames in shared memory (or not staged) */
    uint64_t ran;    /* 24 every frame's stages done, verdicts stored */
    uint64_t merged; /* 32 queue counters merged (after done, off the latency path) */
    uint64_t fenced; /* 40 just before the done word's release store */
    uint64_t parsed; /* 48 pw_run_split's parse pass done: every frame's ACL key in shared memory
                      *    (0: the burst took another path) */
    uint64_t reserved;
} pw_burst_trace;
PW_STATIC_ASSERT(sizeof(pw_burst_trace) == 64, "pw_burst_trace size");

#endif /* PKTWARP_ABI_H */
