"""ATSSS on the veth testbed (netapp/testbed/atsss_site.py), two measurements:

- transfers: 20 MB from the data network to the UE's MP-DCCP receiver with each scheduler, through
  the site of tests/atsss/test_testbed.py (the 3GPP path DELAY_MS late and limited to RATE), every
  byte checked in MP_SEQ order; the time each took.
- fig4: downlink throughput against packet size x number of UEs, the shape of the MP-DCCP proxy
  paper's Fig. 4, for the NetApp's XDP path (the pipeline with a round-robin session per UE over
  both accesses, encapsulating into MP-DCCP and sending back by XDP_TX) and for the kernel path
  (no XDP: the node's stack forwards the same packets back out of n0 by its routing table; this
  kernel has no DCCP, IPIP, GRE or FOU to encapsulate with, so the kernel path does less work per
  packet than a kernel proxy would). dpp-pktgen sends the UE packets (one frame per UE,
  interleaved, unpaced; beyond the 256 frames its mixed mode holds, each frame is SPREAD UEs: the
  generator adds to the low 16 bits of its UE address and updates the IPv4 header's checksum) from
  the router's r1 into the node's n0 on CPU 0, where the node's receive runs too: both paths on
  the same core. What comes back to r1 is counted there and dropped
  (xdp_count), so the router's forwarding does not bound either path.

    python -m bench.atsss.testbed --out bench/results/atsss_testbed.md
    python -m bench.atsss.testbed --bytes 0 --ues 10000 --sizes 64,512,1400   # some of Fig. 4 only

Root; dataplane/build built. Writes the markdown tables to --out and the rows beside it as CSV."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import ipaddress
import statistics
import tempfile
import time
from pathlib import Path

from bench.throughput.frames import write_pcap
from bench.throughput.generator import Generator
from bench.throughput.sink import Sink
from netapp.atsss.models import AtsssSessionSpec
from netapp.tenancy.models import TenantQuotas, TenantSpec
from netapp.tenancy.service import TenantService
from netapp.testbed import netns
from netapp.testbed.atsss_site import UE_ADDRESS, UE_PREFIX, AtsssSite
from tests.atsss.atsss import ue_packet
from tests.atsss.testbed import ADMIN, Node, Receiver, Transfer, relay, send, session
from tests.atsss.test_testbed import DELAY_MS, RATE, SCHEDULERS, WINDOW

BUILD = Path(__file__).resolve().parents[2] / "dataplane" / "build"
CPU = 0  # the generator's, and so the node's receive
SIZES = (64, 256, 512, 1024, 1400)  # Ethernet frame bytes of the UE packet as the node receives it
UES = (1, 16, 256, 10_000)  # beyond 256 frames (dpp-pktgen's mixed mode), a frame is SPREAD UEs
ETH_HEADER = 14
MIX_FRAMES = 256  # dpp-pktgen's mixed mode: at most this many frames
# Where the generator spreads a frame over UEs: the low 16 bits of the IPv4 destination, and the
# checksums that cover them, the IPv4 header's and the UDP one (0 in these frames, and left so).
UE_LOW16_AT, IPV4_CSUM_AT, UDP_CSUM_AT = ETH_HEADER + 18, ETH_HEADER + 10, ETH_HEADER + 20 + 6


# --- transfers -------------------------------------------------------------------------------------

def transfers(size: int, state: Path) -> list[dict]:
    """`size` bytes with each scheduler; per scheduler its time and rate."""
    rows = []
    transfer = Transfer.random(size)
    site = AtsssSite().build()
    try:
        site.limit_rate("p1", RATE)
        with relay(site, "p1", DELAY_MS):
            node = Node(site, state)
            try:
                for mode, (p1, p2, _) in SCHEDULERS.items():
                    receiver = Receiver(site, transfer.part)
                    try:
                        node.create(session(site, mode, p1, p2))
                        start = time.monotonic()
                        result = send(site, transfer, receiver, WINDOW)
                        seconds = time.monotonic() - start
                    finally:
                        receiver.close()
                        node.delete_sessions()
                    rows.append({"scheduler": mode, "bytes": size, "datagrams": result.delivered,
                                 "p1": result.per_path["p1"], "p2": result.per_path["p2"],
                                 "reordered": result.out_of_order, "seconds": round(seconds, 3),
                                 "MB_per_s": round(size / seconds / 1e6, 1)})  # fmt: skip
                    print(rows[-1], flush=True)
            finally:
                node.close()
    finally:
        site.destroy()
    return rows


# --- Fig. 4 ----------------------------------------------------------------------------------------

def ue_address(k: int) -> str:
    return str(ipaddress.ip_address(UE_ADDRESS) + k)


def ue_layout(ues: int) -> tuple[int, int]:
    """(frames, spread): frame i of the pcap is UEs i * spread .. i * spread + spread - 1, the
    generator adding (k / frames) mod spread to its UE address; spread 1 up to MIX_FRAMES UEs."""
    spread = -(-ues // MIX_FRAMES)
    while ues % spread:
        spread += 1
    if ues // spread > MIX_FRAMES:
        raise ValueError(f"{ues} UEs: no spread of at most {MIX_FRAMES} frames reaches each once")
    return ues // spread, spread


def ue_frames(site: AtsssSite, ues: int, size: int) -> list[bytes]:
    """A frame per UE, or per `spread` UEs (ue_layout), two of the one UE, each from a data
    network host of its own: to the frame's first UE, `size` bytes on the wire, to n0. dpp-pktgen
    writes each frame's bytes up to the last that differs among them anew (a live frame's page is
    sent again as the last run left it, and the kernel path's forwarding rewrites the MACs and the
    TTL in place): differing sources make that the Ethernet and IP headers, for one UE too."""
    frames, spread = ue_layout(ues)
    payload = bytes(size - ETH_HEADER - 28)
    macs = bytes.fromhex(site.n0.mac.replace(":", "") + site.r1.mac.replace(":", ""))
    hosts = ipaddress.ip_address(site.dn0.ip) + 100
    return [macs + b"\x08\x00" + ue_packet(ue_address(k % frames * spread), payload, src=str(hosts + k))
            for k in range(max(frames, 2))]  # fmt: skip


def spread_generator(generator: Generator, ues: int) -> Generator:
    """`generator` spreading each frame of ue_frames over its UEs, checksums kept valid."""
    _, spread = ue_layout(ues)
    return dataclasses.replace(generator, spread=spread, spread_offset=UE_LOW16_AT,
                               checksums=(IPV4_CSUM_AT, UDP_CSUM_AT))  # fmt: skip


def ue_session(site: AtsssSite, k: int) -> AtsssSessionSpec:
    """UE k's round-robin session over both accesses, its own DCCP ports (a subflow is one session's)."""
    spec = session(site, "round_robin").model_dump(mode="json")
    spec.update(name=f"ue{k}", ue=ue_address(k))
    for body in spec["paths"]:
        body["peer_port"] += 2 * k
    return AtsssSessionSpec.model_validate(spec)


def measure(sink: Sink, generator: Generator, pcap: Path, frames: int) -> dict:
    """One unpaced run: frames offered and delivered per second (delivered over the run's span)."""
    before = sink.read().other
    sent = generator.send(pcap, frames, 0)
    delivered = sink.read().other - before
    span = sent.frames / sent.achieved_pps
    return {"offered_mpps": sent.achieved_pps / 1e6, "delivered_mpps": delivered / span / 1e6,
            "delivered": delivered, "sent": sent.frames}  # fmt: skip


def fig4(frames: int, runs: int, state: Path, ues: tuple[int, ...] = UES,
         sizes: tuple[int, ...] = SIZES) -> list[dict]:
    """Every (ues, sizes) point of both paths; the XDP path's sessions, one per UE address of the
    largest number of UEs, are all installed for every point."""
    rows = []
    points = [(n, size) for n in ues for size in sizes]
    site = AtsssSite().build()
    try:
        pktgen = BUILD / "dpp-pktgen"
        generator = Generator(pktgen, site.ns("r"), site.r1.ifname, cpu=CPU)
        node_ns = site.ns("node")
        netns.sysctl(node_ns, "net.ipv4.ip_forward", 1)
        for conf in ("all", site.n0.ifname):
            netns.sysctl(node_ns, f"net.ipv4.conf.{conf}.send_redirects", 0)
            netns.sysctl(node_ns, f"net.ipv4.conf.{conf}.rp_filter", 0)
        netns.run(["ip", "route", "add", UE_PREFIX, "via", site.r1.ip], netns=node_ns)
        # The kernel path: n0 takes the generator's frames through an XDP program that passes them on.
        netns.attach_xdp_object(node_ns, site.n0.ifname, str(BUILD / "xdp_pass.bpf.o"))
        rows += sweep("kernel", site, generator, points, frames, runs, state)
        for ns, port in ((node_ns, site.n0), (site.ns("r"), site.r1)):  # Node attaches its own
            netns.run(["ip", "link", "set", "dev", port.ifname, "xdp", "off"], netns=ns)
        node = Node(site, state)
        try:
            allow_sessions(node, max(ues))
            for k in range(max(ues)):
                node.atsss.create_session(ADMIN, f"ue{k}", ue_session(site, k))
            rows += sweep("xdp", site, generator, points, frames, runs, state)
        finally:
            node.close()
    finally:
        site.destroy()
    return rows


def allow_sessions(node: Node, sessions: int) -> None:
    """The operator's own tenant may hold `sessions` ATSSS sessions: its site-wide record, with
    that quota where the default is smaller."""
    if TenantQuotas().atsss_sessions < sessions:
        spec = TenantSpec(site=True, quotas=TenantQuotas(atsss_sessions=sessions))
        TenantService(lambda: node.store).put_tenant(ADMIN, ADMIN.tenant, spec)


def sweep(system: str, site: AtsssSite, generator: Generator, points: list[tuple[int, int]], frames: int, runs: int,
          state: Path) -> list[dict]:
    """Each (UEs, frame size) of `points` for `system`, counted on r1 (xdp_count, attached there
    for the sweep)."""
    rows = []
    sink = Sink(BUILD / "xdp_count.bpf.o", site.ns("r"), site.r1.ifname, teid_base=0, flows=0)
    try:
        rows += [point(system, site, sink, spread_generator(generator, ues), ues, size, frames, runs, state)
                 for ues, size in points]  # fmt: skip
    finally:
        sink.close()
    return rows


def point(system: str, site: AtsssSite, sink: Sink, generator: Generator, ues: int, size: int, frames: int,
          runs: int, state: Path) -> dict:
    pcap = write_pcap(state / f"ue{ues}-{size}.pcap", ue_frames(site, ues, size))
    samples = [measure(sink, generator, pcap, frames) for _ in range(runs)]
    delivered = statistics.median(s["delivered_mpps"] for s in samples)
    row = {"system": system, "ues": ues, "frame_bytes": size,
           "offered_mpps": round(statistics.median(s["offered_mpps"] for s in samples), 3),
           "delivered_mpps": round(delivered, 3), "delivered_gbps": round(delivered * size * 8 / 1e3, 2),
           "loss": round(1 - sum(s["delivered"] for s in samples) / sum(s["sent"] for s in samples), 4)}  # fmt: skip
    print(row, flush=True)
    return row


# --- report ----------------------------------------------------------------------------------------

def table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[key]) for key in keys) + " |" for row in rows]
    return "\n".join(lines)


def fig4_table(rows: list[dict]) -> str:
    """Delivered Mpps, XDP / kernel, a row per number of UEs and a column per frame size."""
    cell = {(r["system"], r["ues"], r["frame_bytes"]): r["delivered_mpps"] for r in rows}
    sizes = sorted({r["frame_bytes"] for r in rows})
    lines = ["| UEs | " + " | ".join(f"{size} B" for size in sizes) + " |", "|---|" + "---|" * len(sizes)]
    for ues in sorted({r["ues"] for r in rows}):
        lines.append(f"| {ues:,} | " + " | ".join(f"{cell[('xdp', ues, size)]:.3f} / {cell[('kernel', ues, size)]:.3f}"
                                                for size in sizes) + " |")  # fmt: skip
    return "\n".join(lines)


def write(out: Path, transfer_rows: list[dict], fig4_rows: list[dict]) -> None:
    parts = []
    if transfer_rows:
        parts += ["## Transfers (each scheduler, every byte checked in MP_SEQ order)", "", table(transfer_rows), ""]
    if fig4_rows:
        parts += ["## Downlink throughput, delivered Mpps, XDP / kernel path (CPU 0 for both)", "",
                  fig4_table(fig4_rows), "", table(fig4_rows), ""]  # fmt: skip
    out.write_text("\n".join(parts))
    with out.with_suffix(".csv").open("w", newline="") as f:
        for rows in (transfer_rows, fig4_rows):
            if rows:
                writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)


def numbers(text: str) -> tuple[int, ...]:
    """`1,16,256`, for argparse."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated whole numbers, e.g. 1,16,256") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: each at least 1")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/atsss_testbed.md"))
    parser.add_argument("--bytes", type=int, default=20_000_000, help="of each scheduler's transfer (0: none)")
    parser.add_argument("--frames", type=int, default=1_000_000, help="per Fig. 4 run")
    parser.add_argument("--runs", type=int, default=3, help="per Fig. 4 point; the median is reported")
    parser.add_argument("--no-fig4", action="store_true")
    parser.add_argument("--ues", type=numbers, default=UES, help="Fig. 4's numbers of UEs, comma-separated")
    parser.add_argument("--sizes", type=numbers, default=SIZES, help="Fig. 4's frame sizes, comma-separated")
    args = parser.parse_args()
    for ues in args.ues:
        ue_layout(ues)  # refused before the site is built
    with tempfile.TemporaryDirectory() as state:
        transfer_rows = transfers(args.bytes, Path(state)) if args.bytes else []
        fig4_rows = [] if args.no_fig4 else fig4(args.frames, args.runs, Path(state), args.ues, args.sizes)
    write(args.out, transfer_rows, fig4_rows)


if __name__ == "__main__":
    main()
