/* Out-of-line copies of DPDK's static inline functions; see shim.h. */
#include "shim.h"

uint16_t pw_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
                             uint16_t nb_pkts)
{
	return rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts);
}

uint16_t pw_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
                             uint16_t nb_pkts)
{
	return rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts);
}

struct rte_mbuf *pw_rte_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int pw_rte_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs,
                              unsigned int count)
{
	return rte_pktmbuf_alloc_bulk(pool, mbufs, count);
}

void pw_rte_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

void pw_rte_pktmbuf_refcnt_update(struct rte_mbuf *m, int16_t v)
{
	rte_pktmbuf_refcnt_update(m, v);
}

uint16_t pw_rte_mbuf_refcnt_read(const struct rte_mbuf *m)
{
	return rte_mbuf_refcnt_read(m);
}

void pw_rx_free_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		const struct rte_mbuf *m = mbufs[i];
		if (m->pool != pool || m->nb_segs != 1 || !RTE_MBUF_DIRECT(m) ||
		    rte_mbuf_refcnt_read(m) != 1) {
			rte_pktmbuf_free_bulk(mbufs, n);
			return;
		}
	}
	rte_mempool_put_bulk(pool, (void **)mbufs, n);
}

int pw_rte_mempool_get_bulk(struct rte_mempool *mp, void **obj_table, unsigned int n)
{
	return rte_mempool_get_bulk(mp, obj_table, n);
}

void *pw_rte_pktmbuf_mtod(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, void *);
}

char *pw_rte_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_append(m, len);
}

int pw_rte_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail)
{
	return rte_pktmbuf_chain(head, tail);
}

uint16_t pw_rte_pktmbuf_data_room_size(struct rte_mempool *mp)
{
	return rte_pktmbuf_data_room_size(mp);
}

uint16_t pw_rte_pktmbuf_tailroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_tailroom(m);
}

int pw_rte_mbuf_rss_hash(const struct rte_mbuf *m, uint32_t *hash)
{
	if (m->ol_flags & RTE_MBUF_F_RX_RSS_HASH) {
		*hash = m->hash.rss;
		return 1;
	}
	return 0;
}

unsigned int pw_rte_lcore_id(void)
{
	return rte_lcore_id();
}

int pw_rte_errno(void)
{
	return rte_errno;
}

unsigned int pw_rte_ring_enqueue_burst(struct rte_ring *r, void *const *obj_table,
                                       unsigned int n)
{
	return rte_ring_enqueue_burst(r, obj_table, n, NULL);
}

unsigned int pw_rte_ring_dequeue_burst(struct rte_ring *r, void **obj_table, unsigned int n)
{
	return rte_ring_dequeue_burst(r, obj_table, n, NULL);
}

uint64_t pw_eth_rss_ip(void) { return RTE_ETH_RSS_IP; }
uint64_t pw_eth_rss_tcp(void) { return RTE_ETH_RSS_TCP; }
uint64_t pw_eth_rss_udp(void) { return RTE_ETH_RSS_UDP; }
uint64_t pw_eth_rss_sctp(void) { return RTE_ETH_RSS_SCTP; }
uint64_t pw_eth_rx_offload_rss_hash(void) { return RTE_ETH_RX_OFFLOAD_RSS_HASH; }
uint64_t pw_eth_rx_offload_scatter(void) { return RTE_ETH_RX_OFFLOAD_SCATTER; }
uint64_t pw_eth_tx_offload_multi_segs(void) { return RTE_ETH_TX_OFFLOAD_MULTI_SEGS; }
uint64_t pw_eth_tx_offload_mbuf_fast_free(void) { return RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE; }
uint64_t pw_eth_rx_metadata_user_mark(void) { return RTE_ETH_RX_METADATA_USER_MARK; }
uint64_t pw_eth_tx_offload_send_on_timestamp(void) { return RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP; }

uint64_t pw_eth_rss_flag(unsigned int index)
{
	static const uint64_t flags[] = {
		RTE_ETH_RSS_IPV4, RTE_ETH_RSS_FRAG_IPV4, RTE_ETH_RSS_NONFRAG_IPV4_TCP,
		RTE_ETH_RSS_NONFRAG_IPV4_UDP, RTE_ETH_RSS_NONFRAG_IPV4_OTHER, RTE_ETH_RSS_IPV6,
		RTE_ETH_RSS_FRAG_IPV6, RTE_ETH_RSS_NONFRAG_IPV6_TCP, RTE_ETH_RSS_NONFRAG_IPV6_UDP,
		RTE_ETH_RSS_NONFRAG_IPV6_OTHER, RTE_ETH_RSS_L3_SRC_ONLY, RTE_ETH_RSS_L3_DST_ONLY,
		RTE_ETH_RSS_L4_SRC_ONLY, RTE_ETH_RSS_L4_DST_ONLY,
	};
	return index < sizeof(flags) / sizeof(flags[0]) ? flags[index] : 0;
}
