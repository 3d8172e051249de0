/* pktwarp's shim over DPDK: every header the bindings need, plus out-of-line wrappers for
 * DPDK's `static inline` fast-path functions (bindgen cannot bind those: they have no symbol). */
#ifndef PW_DPDK_SHIM_H
#define PW_DPDK_SHIM_H

#include <stdint.h>
#include <rte_config.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_bus.h>
#include <rte_memory.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_flow.h>

uint16_t pw_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
                             uint16_t nb_pkts);
uint16_t pw_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
                             uint16_t nb_pkts);
struct rte_mbuf *pw_rte_pktmbuf_alloc(struct rte_mempool *mp);
int pw_rte_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs,
                              unsigned int count);
void pw_rte_pktmbuf_free(struct rte_mbuf *m);
/* rte_pktmbuf_refcnt_update: adds v to the reference count of every segment of m (a frame
 * sent to two ports without a copy; each send or free then takes one reference). */
void pw_rte_pktmbuf_refcnt_update(struct rte_mbuf *m, int16_t v);
uint16_t pw_rte_mbuf_refcnt_read(const struct rte_mbuf *m);
/* rte_mempool_get_bulk: raw objects (mbufs come back with refcnt 1, next NULL, nb_segs 1 and
 * the rest of their first cache line to be set by the caller). Returns 0 or -ENOENT. */
/* Frees n received mbufs: one rte_mempool_put_bulk when every one is direct, single-segment,
 * unshared and from `pool` (what PMDs do with MBUF_FAST_FREE; only first cache lines are
 * read), else rte_pktmbuf_free_bulk. */
void pw_rx_free_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs, unsigned int n);
int pw_rte_mempool_get_bulk(struct rte_mempool *mp, void **obj_table, unsigned int n);
void *pw_rte_pktmbuf_mtod(struct rte_mbuf *m);
char *pw_rte_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
int pw_rte_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail);
uint16_t pw_rte_pktmbuf_data_room_size(struct rte_mempool *mp);
uint16_t pw_rte_pktmbuf_tailroom(const struct rte_mbuf *m);
/* Stores the RSS hash in *hash and returns 1 when the PMD delivered one, else 0. */
int pw_rte_mbuf_rss_hash(const struct rte_mbuf *m, uint32_t *hash);
unsigned int pw_rte_lcore_id(void);
int pw_rte_errno(void);
unsigned int pw_rte_ring_enqueue_burst(struct rte_ring *r, void *const *obj_table,
                                       unsigned int n);
unsigned int pw_rte_ring_dequeue_burst(struct rte_ring *r, void **obj_table, unsigned int n);

/* Constants DPDK defines with function-like macros (RTE_BIT64), which bindgen cannot evaluate. */
uint64_t pw_eth_rss_ip(void);
uint64_t pw_eth_rss_tcp(void);
uint64_t pw_eth_rss_udp(void);
uint64_t pw_eth_rss_sctp(void);
uint64_t pw_eth_rx_offload_rss_hash(void);
uint64_t pw_eth_rx_offload_scatter(void);
uint64_t pw_eth_tx_offload_multi_segs(void);
uint64_t pw_eth_tx_offload_mbuf_fast_free(void);
/* RTE_ETH_RX_METADATA_USER_MARK: rte_eth_rx_metadata_negotiate's bit for rte_flow MARK ids. */
uint64_t pw_eth_rx_metadata_user_mark(void);
uint64_t pw_eth_tx_offload_send_on_timestamp(void);
/* RTE_ETH_RSS_* bits by index, in this order: IPV4, FRAG_IPV4, NONFRAG_IPV4_TCP,
 * NONFRAG_IPV4_UDP, NONFRAG_IPV4_OTHER, IPV6, FRAG_IPV6, NONFRAG_IPV6_TCP, NONFRAG_IPV6_UDP,
 * NONFRAG_IPV6_OTHER, L3_SRC_ONLY, L3_DST_ONLY, L4_SRC_ONLY, L4_DST_ONLY; 0 past the end. */
uint64_t pw_eth_rss_flag(unsigned int index);

#endif
