/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of the GTP-U dispatcher ("XDP RSS", bpf/nf/qos/rss.h): the interfaces that dispatch, the
 * worker CPUs they spread tunnels over, and the hash that picks a worker (netapp/qos/dispatch.py
 * computes it too, to say which worker a tunnel gets). */
#ifndef DPP_NF_RSS_H
#define DPP_NF_RSS_H

#include <linux/types.h>

/* Map size: dispatcher interface slots (dpp_rss_ifaces, an interface's slot is ifindex % this). */
#ifndef DPP_MAX_RSS_IFACES
#define DPP_MAX_RSS_IFACES 64
#endif
/* Map size: worker slots (dpp_rss_workers): the most workers one set has. */
#ifndef DPP_MAX_RSS_WORKERS
#define DPP_MAX_RSS_WORKERS 128
#endif

/* The hash of a T-PDU's (TEID, QFI): murmur3's 32-bit finalizer of TEID + QFI * DPP_RSS_QFI_MUL.
 * Two multiplies: every input bit reaches the high bits, which choose the worker (a TEID's worker
 * is (hash * workers) >> 32), whether TEIDs are handed out in sequence or at random. */
#define DPP_RSS_QFI_MUL 0x9e3779b9u
#define DPP_RSS_MIX1 0x85ebca6bu
#define DPP_RSS_MIX2 0xc2b2ae35u

/* Value of dpp_rss_ifaces, at slot ifindex % DPP_MAX_RSS_IFACES: an interface that dispatches. */
struct dpp_rss_iface {
	__u32 ifindex; /* the interface the slot holds (another ifindex: the slot is not its) */
	__u32 workers; /* worker slots in use, dpp_rss_workers[0, workers); 0: it does not dispatch */
};

/* Value of dpp_rss_workers, indexed by worker slot: the CPU a tunnel hashed to the slot goes to. */
struct dpp_rss_worker {
	__u32 cpu;
};

#endif /* DPP_NF_RSS_H */
