/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of the user plane function (bpf/nf/upf/): interface roles, the PDR tables of the uplink
 * (by TEID: an array for the TEIDs below its size, a hash for the others and for PDRs by QFI) and the
 * downlink (by network instance and UE address: an array for the pools' IPv4 addresses, a
 * set-associative array for other IPv4 addresses, a hash for IPv6 and what overflows), each entry a PDR's whole action with its FAR, QER
 * and URR folded in, and the usage counters of the URRs. Mirrored in
 * netapp/upf/abi.py, checked against BTF like the core's. */
#ifndef DPP_NF_UPF_H
#define DPP_NF_UPF_H

#include <linux/types.h>

/* Map sizes: interface slots (dpp_upf_ifaces, direct-mapped by ifindex), PDR entries of each
 * direction (hash maps, not preallocated: memory follows the sessions), TEIDs of the uplink's array
 * (dpp_upf_teids: preallocated, 64 bytes each; the TEIDs the UPF chooses are below it), URR slots. */
#ifndef DPP_MAX_UPF_IFACES
#define DPP_MAX_UPF_IFACES 1024
#endif
#ifndef DPP_MAX_UPF_PDRS
#define DPP_MAX_UPF_PDRS 1048576
#endif
/* Entries of dpp_upf_sdf_pdrs: PDRs with SDF filters, the classifier's UPF rules' arguments. */
#ifndef DPP_MAX_UPF_SDF_PDRS
#define DPP_MAX_UPF_SDF_PDRS 65536
#endif
#ifndef DPP_MAX_UPF_TEIDS
#define DPP_MAX_UPF_TEIDS 65536
#endif
/* Slots of dpp_upf_ue4: the UE IPv4 addresses of the pools the UPF assigns from (upf.ue_pools), the
 * pools one after the other (preallocated, 64 bytes each: 65,536 is a /16). */
#ifndef DPP_MAX_UPF_UE4
#define DPP_MAX_UPF_UE4 65536
#endif
/* Slots of dpp_upf_dl4: the downlink of the UE IPv4 addresses the SMF gives, DPP_UPF_DL4_WAYS slots
 * (ways) a bucket (preallocated, 64 bytes each: 65,536 is 16,384 buckets, 4 MiB). The program uses
 * the largest power of two of buckets that fits (struct dpp_upf_iface.dl4_bits). */
#ifndef DPP_MAX_UPF_DL4
#define DPP_MAX_UPF_DL4 65536
#endif
#define DPP_UPF_DL4_WAYS 4
/* The bucket of a UE IPv4 address in dpp_upf_dl4: the top dl4_bits bits of its host-order value
 * times this (Fibonacci hashing), xor its network instance (nf/upf/upf.h, netapp/upf/ways.py). */
#define DPP_UPF_DL4_HASH_MUL 0x9e3779b1u
/* A way as libdpp's dpp_upf_dl4_place reads it in its caller's shadow of dpp_upf_dl4 (a byte a
 * slot, netapp/upf/ways.py): clean when 0, else these bits. */
#define DPP_UPF_DL4_PUBLISHED 1
#define DPP_UPF_DL4_RETIRED 2
#define DPP_UPF_DL4_STRAY 4
#define DPP_UPF_DL4_TAKEN 8
/* dpp_upf_dl4_place's bucket and way of an entry that goes to dpp_upf_downlink (the hash), and of
 * one that stays in the way it has. */
#define DPP_UPF_DL4_HASHED -1
#define DPP_UPF_DL4_STAYS -2
#ifndef DPP_MAX_UPF_URRS
#define DPP_MAX_UPF_URRS 65536
#endif
/* Slots of each CPU's route cache (dpp_upf_routes): a power of two. */
#ifndef DPP_UPF_ROUTE_SLOTS
#define DPP_UPF_ROUTE_SLOTS 256
#endif

/* struct dpp_upf_ul_key.qfi of a TEID's own entry: packets of any QFI, or none. */
#define DPP_UPF_QFI_ANY 0xff

/* struct dpp_upf_pdr.pdu_type of an ENCAP entry: GTP-U without a PDU Session Container (the tunnel
 * action keeps a T-PDU's lack of one: nf/tunnel/tunnel.h). */
#define DPP_UPF_PDU_NO_CONTAINER 0xff

/* enum dpp_upf_role: what an interface is to the UPF (struct dpp_upf_iface.role). */
enum dpp_upf_role {
	DPP_UPF_ROLE_NONE = 0, /* not the UPF's: the pipeline as without it */
	DPP_UPF_ROLE_N3 = 1,   /* towards the RAN: GTP-U to our N3 address is decapsulated */
	DPP_UPF_ROLE_N6 = 2,   /* towards a data network: packets to UE addresses are encapsulated */
	DPP_UPF_ROLE_N9 = 3,   /* towards another UPF: GTP-U, like N3 */
};

/* enum dpp_upf_far: what the FAR's apply action does with a matched packet. */
enum dpp_upf_far {
	DPP_UPF_FAR_FORWARD = 0, /* FORW: out, as struct dpp_upf_pdr.output says */
	DPP_UPF_FAR_DROP = 1,	 /* DROP */
	DPP_UPF_FAR_BUFFER = 2,	 /* BUFF (NOCP): to user space (dpp_upf_punt), dropped here */
};

/* enum dpp_upf_output: the verdict a forwarded packet gets (the 2023 XDP UPF paper's variants). */
enum dpp_upf_output {
	DPP_UPF_OUTPUT_FIB = 0,	     /* bpf_fib_lookup: MACs and egress from the kernel's tables */
	DPP_UPF_OUTPUT_TX = 1,	     /* XDP_TX, the MACs swapped: back where it came from */
	DPP_UPF_OUTPUT_REDIRECT = 2, /* MACs from the FIB, out of struct dpp_upf_pdr.ifindex (dpp_ports) */
	DPP_UPF_OUTPUT_PASS = 3,     /* XDP_PASS: the kernel's stack routes it */
	DPP_UPF_OUTPUT_PRIVATE = 4,  /* the network instance's private table (struct dpp_upf_pdr.ifindex) */
};

/* enum dpp_upf_pdr_flags: struct dpp_upf_pdr.flags bits. */
enum dpp_upf_pdr_flags {
	DPP_UPF_PDR_DECAP = 1,	  /* outer header removal: GTP-U/UDP/IP (and what carried them) */
	DPP_UPF_PDR_ENCAP = 2,	  /* outer header creation: GTP-U/UDP/IP with a PDU Session Container */
	DPP_UPF_PDR_BY_QFI = 4,	  /* a TEID's own entry: look again with the packet's QFI first */
	DPP_UPF_PDR_NO_MATCH = 8, /* a TEID's own entry that matches nothing by itself */
	DPP_UPF_PDR_SDF = 16,	  /* the TEID's (UE address's) PDRs have SDF filters: classify first */
	DPP_UPF_PDR_DUPL = 32,	  /* FAR DUPL: a copy to user space (dpp_upf_punt), then as the FAR says */
	DPP_UPF_PDR_ENTRY = 64,	  /* dpp_upf_teids, _ue4, _dl4: the slot holds its entry (else: no PDR) */
	DPP_UPF_PDR_UDP = 128,	  /* ENCAP: UDP/IP alone (no GTP-U), to port teid of the peer */
};

/* Value of dpp_upf_ifaces, at slot ifindex % DPP_MAX_UPF_IFACES (no two interfaces of the UPF share
 * a slot: the control plane refuses that): the interface's role and its addresses; on N6 the pool
 * of UE addresses of its network instance, whose downlink is in dpp_upf_ue4 (address - ue4_base +
 * ue4_first; an address of the pool is looked up there only), and how its other IPv4 addresses
 * are looked up in dpp_upf_dl4 (then, if dpp_upf_downlink_state says so, in dpp_upf_downlink). */
struct dpp_upf_iface {
	__u32 ifindex; /* the interface of this slot; 0: none */
	__u8 role;     /* enum dpp_upf_role */
	__u8 has_ip4;  /* N3/N9: GTP-U to addr4 is ours */
	__u8 has_ip6;  /* N3/N9: GTP-U to addr6 is ours */
	__u8 dl4_bits; /* N6: log2 of dpp_upf_dl4's buckets (1-30; net_instance below 1 << it); 0: unused */
	__u32 net_instance; /* N6: the network instance its packets belong to */
	__u32 addr4;	    /* network order */
	__u32 addr6[4];	    /* network order */
	__u32 ue4_base;	    /* N6: the pool's first address, host order */
	__u32 ue4_count;    /* N6: its addresses; 0: no pool in dpp_upf_ue4 */
	__u32 ue4_first;    /* N6: the slot of dpp_upf_ue4 of ue4_base */
};

/* Key of dpp_upf_uplink: a local TEID, and DPP_UPF_QFI_ANY or (PDRs of the TEID that differ by QFI)
 * a QFI. */
struct dpp_upf_ul_key {
	__u32 teid;
	__u32 qfi;
};

/* Key of dpp_upf_downlink: a UE address in a network instance. */
struct dpp_upf_dl_key {
	__u32 net_instance;
	__u32 family;  /* 4 or 6 */
	__u32 addr[4]; /* network order; IPv4 in addr[0] */
};

/* Value of dpp_upf_teids, dpp_upf_ue4, dpp_upf_dl4, dpp_upf_uplink, dpp_upf_downlink and
 * dpp_upf_sdf_pdrs: what a matched packet gets, whole, so that one lookup serves it; 64 bytes, in the
 * mmapable arrays one cache line. A way of dpp_upf_dl4 holds its key in ue_addr: the network
 * instance is its bucket's (DPP_UPF_DL4_HASH_MUL), so the address alone tells the entry.
 * The policer id took half of what was a 64-bit SEID: the SEID is only there to name the session
 * of a punted frame to user space, and the SEIDs are ours to choose (29.244: the UP function's
 * F-SEID), so the UPF gives them below 2^32 (netapp/upf/sessions.py, SEID_SPACE) and 32 bits name
 * any; a 4-billion-session node is past any other limit here. The other fields are each needed
 * by some entry at once (an encapsulating entry uses peer, local and teid; a way its ue_addr), and
 * a second line per packet would cost more than the policer. */
struct dpp_upf_pdr {
	__u8 flags;    /* enum dpp_upf_pdr_flags */
	__u8 far;      /* enum dpp_upf_far */
	__u8 output;   /* enum dpp_upf_output */
	__u8 family;   /* ENCAP: 4 or 6, the outer header's */
	__u8 qfi;      /* ENCAP: the PDU Session Container's QFI (the QER's) */
	__u8 pdu_type; /* ENCAP: the container's PDU type, 0 downlink, 1 uplink (N9); or no container */
	__u16 pdr_id;  /* FAR BUFFER, DUPL: the PDR's id, for user space (struct dpp_upf_punt) */
	__u32 ifindex;	/* OUTPUT_REDIRECT: the egress port, a key of dpp_ports; OUTPUT_PRIVATE: the
			 * network instance whose private routing table gives the next hop */
	__u32 urr;	/* slot of dpp_upf_usage; DPP_NONE: not measured */
	__u32 teid;	/* ENCAP: the peer's TEID; with DPP_UPF_PDR_UDP its UDP port */
	__u32 peer[4];	/* ENCAP: the peer's address, network order (IPv4 in peer[0]) */
	__u32 local[4]; /* ENCAP: our address, the outer source */
	__u32 ue_addr;	/* dpp_upf_dl4: the way's UE IPv4 address, network order (else 0) */
	__u32 seid;	/* FAR BUFFER, DUPL: the PDR's session (our SEID), for user space */
	__u32 policer;	/* its QER's policer of this direction (dpp_policers); 0: not policed */
};
_Static_assert(sizeof(struct dpp_upf_pdr) == 64, "a PDR entry of dpp_upf_teids is one cache line");

/* Frames handed to user space through dpp_upf_punt (bpf/nf/upf/punt.h): the ring's size in bytes
 * (a power of two, pages), and the longest frame it takes (longer ones are dropped, counted). */
#ifndef DPP_UPF_PUNT_RING_SIZE
#define DPP_UPF_PUNT_RING_SIZE 4194304
#endif
#ifndef DPP_UPF_PUNT_FRAME_MAX
#define DPP_UPF_PUNT_FRAME_MAX 2048
#endif

/* enum dpp_upf_punt_kind: why a frame is in dpp_upf_punt (struct dpp_upf_punt.kind). */
enum dpp_upf_punt_kind {
	DPP_UPF_PUNT_BUFFER = 1,    /* FAR BUFF: dropped here, kept by user space until the FAR forwards */
	DPP_UPF_PUNT_DUPLICATE = 2, /* FAR DUPL: a copy; the packet itself went on as the FAR says */
};

/* A record of dpp_upf_punt: the frame as it arrived, before any header was removed or added, and
 * the PDR that punted it (user space finds its session and FAR: netapp/upf/buffering.py). */
struct dpp_upf_punt {
	__u64 seid;    /* struct dpp_upf_pdr.seid */
	__u16 pdr_id;  /* struct dpp_upf_pdr.pdr_id */
	__u8 kind;     /* enum dpp_upf_punt_kind */
	__u8 family;   /* the UE packet's: 4 or 6 */
	__u16 ue_off;  /* where the UE packet starts in frame (after the tunnel's headers, uplink) */
	__u16 reserved;
	__u32 ifindex; /* the ingress: a replay enters the program there again */
	__u32 len;     /* bytes of frame, the whole frame */
	__u8 frame[DPP_UPF_PUNT_FRAME_MAX];
};

/* enum dpp_upf_route_table: whose answer a slot of the route cache holds (struct dpp_upf_route.table). */
enum dpp_upf_route_table {
	DPP_UPF_ROUTE_FIB = 0,	   /* bpf_fib_lookup's */
	DPP_UPF_ROUTE_PRIVATE = 1, /* a network instance's private table's (dpp_routes, dpp_neighs) */
};

/* Value of dpp_upf_routes (per CPU), at a slot given by a hash of the destination: an answer of
 * bpf_fib_lookup or of a private table, reused while the generation it was taken under (dpp_upf_route_gen, which the
 * control plane bumps on every route, neighbour, link or rule change: netapp/upf/nexthop.py) is
 * current (the private tables' writer bumps it too: netapp/routing/table.py). A generation of 0
 * turns the cache off. */
struct dpp_upf_route {
	__u64 gen;     /* dpp_upf_route_gen when the FIB answered; 0: empty */
	__u32 dst[4];  /* the destination looked up, network order (IPv4 in dst[0]) */
	__u32 within;  /* FIB: the ingress ifindex it was looked up for; private: the network instance */
	__u32 egress;  /* the FIB's egress ifindex */
	__u16 max_len; /* the longest packet the FIB let through this way (its MTU is not told) */
	__u8 family;   /* AF_INET or AF_INET6, as struct bpf_fib_lookup's */
	__u8 table;    /* enum dpp_upf_route_table: whose answer */
	__u8 dmac[6]; /* the next hop's */
	__u8 smac[6]; /* the egress's */
};

/* Value of dpp_upf_route_gen, slot 0: the route cache's generation (0: the cache is off). */
struct dpp_upf_route_gen {
	__u64 gen;
};

/* Value of dpp_upf_uplink_state, slot 0: what the applier keeps of dpp_upf_uplink for the data path. */
struct dpp_upf_uplink_state {
	__u32 teids; /* 1: it may hold TEIDs' own entries; 0: none, a TEID past dpp_upf_teids is a miss */
};

/* Value of dpp_upf_downlink_state, slot 0: what the applier keeps of dpp_upf_downlink for the data path. */
struct dpp_upf_downlink_state {
	__u32 ue4; /* 1: it may hold IPv4 entries; 0: none, an IPv4 address dpp_upf_dl4 lacks is a miss */
};

/* Value of dpp_upf_usage, indexed by URR slot: the UE packets' volume each way, added to atomically
 * (one copy for every CPU: a packet touches one line of it, not a per-CPU pointer and a value). */
struct dpp_upf_usage {
	__u64 ul_packets;
	__u64 ul_bytes;
	__u64 dl_packets;
	__u64 dl_bytes;
};

/* The UPF's reasons, from DPP_REASON_BASE_UPF (dpp/core/consts.h). */
#define DPP_UPF_REASONS(X)                                                                       \
	X(UPF, UPF_TEID_MISS, upf_teid_miss, 0)	/* T-PDU to our N3 address, no PDR has its TEID */       \
	X(UPF, UPF_NO_ROUTE, upf_no_route, 1)	/* no route to the destination: to the kernel */         \
	X(UPF, UPF_NO_NEIGH, upf_no_neigh, 2)	/* next hop unresolved: to the kernel */                 \
	X(UPF, UPF_BUFFERED, upf_buffered, 3)	/* FAR BUFF: to user space (dpp_upf_punt), dropped */    \
	X(UPF, UPF_FAR_DROP, upf_far_drop, 4)	/* FAR DROP */                                           \
	X(UPF, UPF_ECHO, upf_echo, 5)		/* GTP-U Echo Request answered (XDP_TX) */               \
	X(UPF, UPF_ERROR_INDICATION, upf_error_indication, 6) /* to the kernel */                        \
	X(UPF, UPF_END_MARKER, upf_end_marker, 7)	      /* to the kernel */                        \
	X(UPF, UPF_ENCAP_FAILED, upf_encap_failed, 8) /* no headroom, or a header out of place */    \
	X(UPF, UPF_NO_PDR, upf_no_pdr, 9) /* SDF filters: no PDR of the TEID or UE address matched */ \
	X(UPF, UPF_PUNT_FULL, upf_punt_full, 10) /* dpp_upf_punt full: BUFF dropped, DUPL uncopied */ \
	X(UPF, UPF_PUNT_TOO_LONG, upf_punt_too_long, 11) /* the same: longer than the ring's frames */

#endif /* DPP_NF_UPF_H */
