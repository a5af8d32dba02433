/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of a rule's tunnel action (bpf/nf/tunnel/): MEC 011's FORWARD_DECAPSULATED and
 * FORWARD_ENCAPSULATED towards a tunnel or an IP interface. A rule with action TUNNEL names, by its
 * arg (a digest of the entry: netapp/mec/tunnels.py), an entry of dpp_tunnels: a struct
 * dpp_upf_pdr (dpp/nf/upf.h), the UPF's own description of what becomes of a packet, read as
 * follows (the other members are not used):
 *   flags  DPP_UPF_PDR_ENTRY: an entry; DPP_UPF_PDR_DECAP: a GTP-U packet's headers up to and
 *          including GTP-U go (a packet without GTP-U is sent as it came); DPP_UPF_PDR_ENCAP: the
 *          packet goes into a tunnel to peer, of the type far says
 *   far    ENCAP: enum dpp_tunnel_type (an entry has no FAR of its own: its packet is forwarded).
 *          GTP-U: a GTP-U packet's tunnel is replaced by one to peer, with the packet's own TEID,
 *          and its PDU Session Container's QFI and direction if it had one, no container if not (a
 *          packet without GTP-U is not re-tunnelled: the default verdict, TUNNEL_NOT_GTPU). GRE:
 *          the IP packet (a GTP-U packet's UE packet, its tunnel's headers gone, or the innermost
 *          IP packet of one without GTP-U) goes into GRE/IP to peer
 *   teid   DPP_TUNNEL_GRE_KEY: the GRE key
 *   output DPP_UPF_OUTPUT_REDIRECT: out of port ifindex (dpp_ports), the frame's MACs kept;
 *          DPP_UPF_OUTPUT_FIB: towards peer, its next hop from the FIB (through the route cache)
 *   family, peer  the address the packet goes towards (the new tunnel's far end, or the IP
 *          interface's address); local  the new tunnel's source, all zero: the address the packet's
 *          own tunnel was sent to (the IP header carrying its GTP-U, of the same family; a packet
 *          without GTP-U has none: the default verdict, TUNNEL_NO_SOURCE) */
#ifndef DPP_NF_TUNNEL_H
#define DPP_NF_TUNNEL_H

#include <linux/types.h>

/* Map size: tunnel entries (dpp_tunnels), one per distinct destination the rules name. */
#ifndef DPP_MAX_TUNNELS
#define DPP_MAX_TUNNELS 4096
#endif

/* The tunnel action's reasons, from DPP_REASON_BASE_TUNNEL (dpp/core/consts.h). */
#define DPP_TUNNEL_REASONS(X)                                                                    \
	X(TUNNEL, TUNNEL_MISSING, tunnel_missing, 0)	 /* the arg names no dpp_tunnels entry */     \
	X(TUNNEL, TUNNEL_NOT_GTPU, tunnel_not_gtpu, 1)	 /* re-tunnelling a packet without GTP-U */   \
	X(TUNNEL, TUNNEL_NO_SOURCE, tunnel_no_source, 2) /* no source of the peer's family */        \
	X(TUNNEL, TUNNEL_FAILED, tunnel_failed, 3)	 /* headers not removed or added (headroom) */ \
	X(TUNNEL, TUNNEL_NOT_IP, tunnel_not_ip, 4)	 /* into GRE: no IP packet to carry */        \
	X(TUNNEL, TUNNEL_COPY_FAILED, tunnel_copy_failed, 5) /* a copy not decapsulated: dropped */

/* enum dpp_tunnel_type: the tunnel an ENCAP entry builds (struct dpp_upf_pdr.far of its entry). */
enum dpp_tunnel_type {
	DPP_TUNNEL_GTPU = 0,	/* GTP-U/UDP/IP (the UPF's encapsulation), the packet's TEID kept */
	DPP_TUNNEL_GRE = 1,	/* GRE/IP (RFC 2784) without a key */
	DPP_TUNNEL_GRE_KEY = 2, /* GRE/IP with the key (RFC 2890) the entry's teid holds */
};

#endif /* DPP_NF_TUNNEL_H */
