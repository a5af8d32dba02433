/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* XDP RSS, the GTP-U dispatcher: a NIC's RSS sees one outer flow per gNB, so the CPU that receives
 * N3 spreads the tunnels inside over worker CPUs itself. On a dispatcher interface (dpp_rss_ifaces)
 * a GTP-U T-PDU goes through dpp_rss_cpu_map to a worker, whose CPUMAP program (dpp_rss_worker,
 * dpp.bpf.c) runs the pipeline there, the UPF first. The worker is a steering rule's CPU when one
 * matches and that CPU is a worker (an intent wins), else the one the hash of (TEID, QFI) picks. */
#ifndef DPP_NF_QOS_RSS_H
#define DPP_NF_QOS_RSS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "core/classify.h"
#include "core/counters.h"
#include "core/outcome.h"
#include "core/parse.h"
#include "nf/qos/rss_maps.h"

/* The dispatcher entry of ifindex, or NULL: one inlined array lookup per packet. */
static __always_inline const struct dpp_rss_iface *rss_iface(__u32 ifindex)
{
	__u32 slot = ifindex % DPP_MAX_RSS_IFACES;
	const struct dpp_rss_iface *iface = bpf_map_lookup_elem(&dpp_rss_ifaces, &slot);

	if (!iface || iface->ifindex != ifindex || !iface->workers)
		return NULL;
	return iface;
}

/* murmur3's finalizer of TEID + QFI * DPP_RSS_QFI_MUL (dpp/nf/rss.h says why). */
static __always_inline __u32 rss_hash(__u32 teid, __u32 qfi)
{
	__u32 h = teid + qfi * DPP_RSS_QFI_MUL;

	h ^= h >> 16;
	h *= DPP_RSS_MIX1;
	h ^= h >> 13;
	h *= DPP_RSS_MIX2;
	h ^= h >> 16;
	return h;
}

/* The worker CPU the hash picks: slot (hash * workers) >> 32 (no division, any worker count). */
static __always_inline __u32 rss_hashed_cpu(const struct dpp_flow_key *key, __u32 workers)
{
	__u32 qfi = (key->flags & DPP_KEY_GTP_QFI) ? key->qfi : 0;
	__u32 slot = (__u32)(((__u64)rss_hash(key->teid, qfi) * workers) >> 32);
	const struct dpp_rss_worker *worker = bpf_map_lookup_elem(&dpp_rss_workers, &slot);

	return worker ? worker->cpu : DPP_NONE;
}

/* A T-PDU with its TEID found (signalling and faulty packets stay on this CPU). */
static __always_inline bool rss_tunnelled(const struct dpp_parse *p, int reason)
{
	return !reason && (p->key.flags & DPP_KEY_GTP) && p->layers.gtp;
}

/* Hand the packet to cpu's worker queue; false when that CPU has none. */
static __always_inline bool rss_send(__u32 cpu, struct dpp_outcome *o, __u64 bytes)
{
	if (cpu == DPP_NONE || bpf_redirect_map(&dpp_rss_cpu_map, cpu, 0) != XDP_REDIRECT)
		return false;
	count(&dpp_rss_stats, cpu, bytes);
	o->action = DPP_ACTION_STEER;
	o->cpu = cpu;
	return true;
}

/* What dpp_rss_dispatch did: left the packet to this CPU, or sent it to the worker the hash or a
 * steering rule chose. */
#define DPP_RSS_NOT_DISPATCHED -1
#define DPP_RSS_HASHED 0
#define DPP_RSS_STEERED 1

/* A T-PDU of a dispatcher interface (of `workers` workers) to its worker; DPP_RSS_STEERED with the
 * steering rule that chose it copied to *steer. DPP_RSS_NOT_DISPATCHED when no worker has a queue:
 * the packet stays on this CPU, so nothing is lost to a half-configured set. A global function,
 * verified once: the classifier inlined twice in the entry would pass the verifier's budget. */
__attribute__((noinline)) int dpp_rss_dispatch(const struct dpp_flow_key *key,
					       struct dpp_rule *steer, struct dpp_outcome *o,
					       __u64 bytes, __u32 workers)
{
	const struct dpp_config *cfg;
	const struct dpp_rule *r;
	struct dpp_rule cached;
	__u32 zero = 0;

	cfg = bpf_map_lookup_elem(&dpp_config, &zero);
	if (!key || !steer || !o || !cfg)
		return DPP_RSS_NOT_DISPATCHED;
	r = classify(key, cfg, &cached);
	if (r && r->action == DPP_ACTION_STEER && rss_send(r->arg, o, bytes)) {
		*steer = *r;
		return DPP_RSS_STEERED;
	}
	if (rss_send(rss_hashed_cpu(key, workers), o, bytes))
		return DPP_RSS_HASHED;
	return DPP_RSS_NOT_DISPATCHED;
}

/* On a dispatcher interface, a T-PDU to its worker: XDP_REDIRECT, with *rule the steering rule
 * that chose the worker (copied to *cached; NULL: the hash chose). DPP_RSS_NOT_DISPATCHED for
 * anything else (one inlined array lookup on other interfaces). The entry asks only on a node with a
 * dispatcher interface (DPP_FUNCTION_RSS in dpp_config.functions). */
static __always_inline int rss_dispatch(const struct dpp_parse *p, struct dpp_rule *cached,
					const struct dpp_rule **rule, struct dpp_outcome *o, int reason,
					__u64 bytes)
{
	const struct dpp_rss_iface *iface = rss_iface(p->key.ifindex);
	int sent;

	if (!iface || !rss_tunnelled(p, reason))
		return DPP_RSS_NOT_DISPATCHED;
	/* kernels before 6.3 want a global function's pointer argument initialised (src/kernel.c) */
	__builtin_memset(cached, 0, sizeof(*cached));
	sent = dpp_rss_dispatch(&p->key, cached, o, bytes, iface->workers);
	if (sent == DPP_RSS_NOT_DISPATCHED)
		return DPP_RSS_NOT_DISPATCHED;
	if (sent == DPP_RSS_STEERED)
		*rule = cached;
	return XDP_REDIRECT;
}

/* A worker cannot send XDP_TX (a CPUMAP program has no TX ring): out of the ingress it goes, by a
 * redirect to that interface. */
static __always_inline int rss_worker_verdict(struct xdp_md *ctx, int verdict)
{
	if (verdict != XDP_TX)
		return verdict;
	return bpf_redirect(ctx->ingress_ifindex, 0);
}

#endif /* DPP_NF_QOS_RSS_H */
