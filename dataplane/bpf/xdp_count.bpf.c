// SPDX-License-Identifier: GPL-2.0-only
/* The testbed's sink: counts every frame a veth receives by GTP-U flow, then drops it, so that a
 * sink costs a few reads per frame and never becomes the bottleneck of a throughput test.
 *
 * Two frame shapes are recognised at fixed offsets (IPv4 without options, as the testbed sends):
 *   VXLAN:  Ethernet / IPv4 / UDP 4789 / VXLAN / Ethernet / IPv4 / UDP 2152 / GTP-U
 *           (the RAN side's frame, as the NetApp forwards it to an alternative node)
 *   GTP-U:  Ethernet / IPv4 / UDP 2152 / GTP-U
 *           (the inner packet, after the node's kernel took the VXLAN header off)
 * The flow is (TEID - teid_base) & teid_mask. A third shape is counted when ue_base is set:
 *   UE:     Ethernet / IPv4 (no GTP-U, no VXLAN)
 *           (the UE's own packet, after a UPF removed every outer header): the flow is its
 *           source address - ue_base.
 * Anything else is counted in the last slot. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef COUNT_MAX_FLOWS
#define COUNT_MAX_FLOWS 256
#endif
#define COUNT_OTHER COUNT_MAX_FLOWS

#define ETH_LEN 14
#define IP4_LEN 20
#define UDP_LEN 8
#define VXLAN_LEN 8
#define GTPU_TEID_AT 4 /* flags, type, length, then the TEID */
#define PORT_VXLAN 4789
#define PORT_GTPU 2152
/* Offset of the UDP header of a frame that starts with Ethernet / IPv4 (no options). */
#define UDP_AT (ETH_LEN + IP4_LEN)
#define INNER_AT (UDP_AT + UDP_LEN + VXLAN_LEN)

struct count_value {
	__u64 packets;
	__u64 bytes;
};

/* flow slot (TEID - teid_base), or COUNT_OTHER -> frames and bytes received */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNT_MAX_FLOWS + 1);
	__type(key, __u32);
	__type(value, struct count_value);
} count_flows SEC(".maps");

/* Written before the sink is attached: COUNT_TEID_BASE -> the TEID of flow slot 0,
 * COUNT_TEID_MASK -> the TEID bits that tell flows apart (0: all; the others may number the
 * sessions of one flow), COUNT_UE_BASE -> the UE source address (host order) of flow slot 0 of the
 * UE shape (0: that shape is not counted as a flow). */
enum count_config_slot { COUNT_TEID_BASE, COUNT_TEID_MASK, COUNT_UE_BASE, COUNT_CONFIG_SLOTS };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COUNT_CONFIG_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} count_config SEC(".maps");

/* The UDP destination port of the Ethernet / IPv4 / UDP headers at off; 0 if they are not there. */
static __always_inline __u16 udp_dport_at(void *data, void *end, __u32 off)
{
	__u8 *l2 = data + off;

	if ((void *)(l2 + ETH_LEN + IP4_LEN + UDP_LEN) > end)
		return 0;
	if (*(__be16 *)(l2 + 12) != bpf_htons(ETH_P_IP) || l2[ETH_LEN] != 0x45 ||
	    l2[ETH_LEN + 9] != 17 /* UDP */)
		return 0;
	return bpf_ntohs(*(__be16 *)(l2 + ETH_LEN + IP4_LEN + 2));
}

/* Offset of the GTP-U header, or 0 when the frame has neither shape. */
static __always_inline __u32 gtpu_offset(void *data, void *end)
{
	__u16 port = udp_dport_at(data, end, 0);

	if (port == PORT_GTPU)
		return UDP_AT + UDP_LEN;
	if (port == PORT_VXLAN && udp_dport_at(data, end, INNER_AT) == PORT_GTPU)
		return INNER_AT + UDP_AT + UDP_LEN;
	return 0;
}

static __always_inline __u32 config(__u32 key)
{
	__u32 *value = bpf_map_lookup_elem(&count_config, &key);

	return value ? *value : 0;
}

/* A UE packet: Ethernet / IPv4 that is neither shape above; its source address - ue_base. */
static __always_inline __u32 ue_slot(void *data, void *end)
{
	__u8 *l2 = data;
	__u32 base = config(COUNT_UE_BASE);

	if (!base || (void *)(l2 + ETH_LEN + IP4_LEN) > end ||
	    *(__be16 *)(l2 + 12) != bpf_htons(ETH_P_IP) || (l2[ETH_LEN] >> 4) != 4)
		return COUNT_OTHER;
	return bpf_ntohl(*(__be32 *)(l2 + ETH_LEN + 12)) - base;
}

static __always_inline __u32 flow_slot(void *data, void *end)
{
	__u32 off = gtpu_offset(data, end), mask, slot;
	__be32 *teid;

	if (!off) {
		slot = ue_slot(data, end);
		return slot < COUNT_MAX_FLOWS ? slot : COUNT_OTHER;
	}
	teid = data + off + GTPU_TEID_AT;
	if ((void *)(teid + 1) > end)
		return COUNT_OTHER;
	mask = config(COUNT_TEID_MASK);
	slot = (bpf_ntohl(*teid) - config(COUNT_TEID_BASE)) & (mask ? mask : ~0U);
	return slot < COUNT_MAX_FLOWS ? slot : COUNT_OTHER;
}

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 slot = flow_slot(data, end);
	struct count_value *v = bpf_map_lookup_elem(&count_flows, &slot);

	if (v) {
		v->packets++;
		v->bytes += end - data;
	}
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
