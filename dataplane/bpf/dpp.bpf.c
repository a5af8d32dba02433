// SPDX-License-Identifier: GPL-2.0-only
/* The DPP pipeline's XDP entry: parse, classify, act, count. The protocol parsers live in proto/,
 * the parse stages, the N3 fast path, the classifier and the action dispatch in core/, the actions
 * in nf/ (one folder per network function, ATSSS's and the UPF's ahead of the classifier, FRER's
 * ahead of the parser); this file only wires them together. The programs the
 * entry tail-calls (dpp_progs) come with the headers that hand packets to them (core/trace.h).
 * The same pipeline, without the GTP-U dispatcher and the trace, is the CPUMAP program of the
 * dispatcher's workers (dpp_rss_worker, nf/qos/rss.h). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "core/maps.h"
#include "core/parse.h"
#include "core/n3.h"
#include "core/plain.h"
#include "core/ends.h"
#include "core/classify.h"
#include "core/act.h"
#include "core/counters.h"
#include "core/trace.h"
#include "nf/qos/rss.h"
#include "nf/frer/stage.h"
#include "nf/atsss/stage.h"
#include "nf/atsss/copies.h"
#include "nf/atsss/words.h"

/* Load-time knob (skeleton rodata): record every packet's outcome in dpp_trace. */
const volatile __u8 cfg_trace = 0;

/* Never read: makes every ABI enum (and struct no map names) part of this object's BTF, where
 * tests check the Python mirror (netapp/dataplane/binding.py) against it. */
const volatile struct {
	enum dpp_action action;
	enum dpp_verdict verdict;
	enum dpp_reason reason;
	enum dpp_overlay overlay;
	enum dpp_rule_flags rule_flags;
	enum dpp_key_flags key_flags;
	enum dpp_xdp_mode xdp_mode;
	enum dpp_prog prog;
	enum dpp_functions functions;
	enum dpp_upf_role upf_role;
	enum dpp_upf_far upf_far;
	enum dpp_upf_output upf_output;
	enum dpp_upf_pdr_flags upf_pdr_flags;
	enum dpp_upf_punt_kind upf_punt_kind;
	enum dpp_police_algo police_algo;
	enum dpp_police_gate police_gate;
	enum dpp_police_clock police_clock;
	enum dpp_upf_route_table upf_route_table;
	enum dpp_route_path route_path;
	enum dpp_route_flags route_flags;
	enum dpp_frer_algo frer_algo;
	enum dpp_frer_flags frer_flags;
	enum dpp_frer_role frer_role;
	enum dpp_frer_decision frer_decision;
	enum dpp_frer_gate frer_gate;
	enum dpp_tunnel_type tunnel_type;
	struct dpp_upf_punt upf_punt[0]; /* the records of the ring dpp_upf_punt (no space) */
	struct dpp_dup_meta dup_meta[0]; /* a decapsulating group's frames' metadata (no space) */
} dpp_abi_enums;

/* A fast path (N3, plain) when the packet has its layout, else the staged parser from the first
 * byte. *fast tells which (for the trace only: it costs nothing when tracing is off). */
static __always_inline int parse_packet(struct xdp_md *ctx, struct dpp_parse *p, bool *fast)
{
	*fast = parse_n3(ctx, p) || parse_plain(ctx, p);
	if (*fast)
		return 0;
	return parse_staged(ctx, p);
}

/* Parser reasons that are not faults: the packet goes to the kernel, whatever the default. */
static __always_inline bool is_benign(int reason)
{
	return reason == DPP_REASON_NOT_IP || reason == DPP_REASON_GTP_SIGNALLING;
}

/* The verdict of a parsed packet: sent to a worker (by the dispatcher, which a worker skips: no
 * packet is dispatched twice), ATSSS's (its stage, which does not come back), the UPF's, the
 * parser's, or its rule's (*rule, maybe at *cached). The dispatcher and ATSSS are asked only on a
 * node that has them (cfg->functions): a node without pays one test for both. */
static __always_inline int decide(struct xdp_md *ctx, struct dpp_parse *p, struct dpp_outcome *o,
				  const struct dpp_config *cfg, const struct dpp_rule **rule,
				  struct dpp_rule *cached, int reason, __u64 bytes, bool worker)
{
	int verdict;

	/* before the dispatcher, which classifies too: its steering rules may name a tunnel */
	if (!reason)
		tunnel_ends_fill(ctx, p, cfg);
	if (!worker && (cfg->functions & DPP_FUNCTION_RSS) &&
	    rss_dispatch(p, cached, rule, o, reason, bytes) == XDP_REDIRECT)
		return XDP_REDIRECT;
	if (!worker && !reason && (cfg->functions & DPP_FUNCTION_ATSSS))
		atsss_hand_over(ctx, &p->key);
	verdict = upf(ctx, p, o, reason, cfg);
	if (verdict != DPP_UPF_NOT_MINE)
		return verdict; /* the UPF's: o says what it did */
	if (is_benign(reason)) {
		o->action = DPP_ACTION_PASS;
		o->reason = reason;
		return XDP_PASS;
	}
	if (reason)
		return fallback(cfg, o, reason);
	*rule = classify_entry(&p->key, cfg, cached);
	return act(&(struct dpp_act_ctx){ .ctx = ctx, .key = &p->key, .l = &p->layers, .rule = *rule,
					  .cfg = cfg, .bytes = bytes, .o = o });
}

/* The node's config: its one slot, with the functions' word the entry tests. */
static __always_inline const struct dpp_config *config(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&dpp_config, &zero);
}

/* The pipeline: parse, decide, count (and trace, on the receiving CPU only). */
static __always_inline int pipeline(struct xdp_md *ctx, const struct dpp_config *cfg, bool worker)
{
	__u64 bytes = ctx->data_end - ctx->data;
	const struct dpp_rule *rule = NULL;
	struct dpp_outcome o;
	struct dpp_parse p = {};
	struct dpp_rule cached;
	int reason, verdict;
	bool fast;

	outcome_init(&o);
	p.key.ifindex = ctx->ingress_ifindex;

	reason = parse_packet(ctx, &p, &fast);
	verdict = decide(ctx, &p, &o, cfg, &rule, &cached, reason, bytes, worker);

	if (rule)
		count(&dpp_rule_stats, rule_stat_index(rule->slot), bytes);
	count(&dpp_actions, o.action, bytes);
	count(&dpp_verdicts, verdict, bytes);
	if (o.reason)
		count(&dpp_reasons, o.reason, bytes);
	if (cfg_trace && !worker)
		trace_hand_over(ctx, &p.key, rule, &o, verdict, fast);
	return verdict;
}

/* FRER sees the frame first on a node with streams (cfg->functions, the word the pipeline reads
 * anyway): a node without pays one test. */
SEC("xdp")
int dpp_xdp(struct xdp_md *ctx)
{
	const struct dpp_config *cfg = config();

	if (!cfg)
		return XDP_PASS; /* an array slot always exists; this satisfies the verifier */
	if (cfg->functions & DPP_FUNCTION_FRER)
		frer_hand_over(ctx);
	return pipeline(ctx, cfg, false);
}

/* The devmap program of a FRER member port that wants a VLAN id: its copies get it. */
SEC("xdp/devmap")
int dpp_frer_egress(struct xdp_md *ctx)
{
	return frer_egress(ctx);
}

/* The devmap program of a DUPLICATE port that decapsulates its copies (MEC 011's
 * DUPLICATE_DECAPSULATED): its copy of a GTP-U packet leaves as the UE packet. */
SEC("xdp/devmap")
int dpp_dup_decap(struct xdp_md *ctx)
{
	return dup_decap(ctx);
}

/* The dispatcher's workers: the CPUMAP queues of dpp_rss_cpu_map run it on the worker CPU. */
SEC("xdp/cpumap")
int dpp_rss_worker(struct xdp_md *ctx)
{
	const struct dpp_config *cfg = config();

	if (!cfg)
		return XDP_PASS;
	return rss_worker_verdict(ctx, pipeline(ctx, cfg, true));
}

char LICENSE[] SEC("license") = "GPL";
