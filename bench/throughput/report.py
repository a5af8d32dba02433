"""The result document of a throughput run, its table, and its plots."""

from __future__ import annotations

import datetime
import json
import platform
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.throughput.frames import frame_bytes
from bench.throughput.systems import RECEIVE_CPU as GENERATOR_CPU  # dpp-pktgen runs there too

TARGET_RATIO = 4.0  # the NetApp's zero-loss throughput against the kernel path's, same cores
GENERATOR_SHORT = 0.8  # a result whose trial the generator offered less of the asked rate is marked
SETTINGS = (
    "sizes", "cpus", "systems", "trial_s", "resolution", "sweep_points", "no_sweep", "tolerance", "batch",
    "slack_us", "drain_s", "capacity_margin", "capacity_pps", "queue_size", "cpumap_priority", "ue_flows", "quick",
)  # fmt: skip
METHOD = {
    "size": "bytes of the UE's IPv4 packet; each frame adds 108 bytes of outer Ethernet/IPv4/UDP/VXLAN, "
    "inner Ethernet/IPv4/UDP and GTP-U (frame_bytes)",
    "traffic": "16 GTP-U services (TEIDs 0x8894D0D0-DF) in VXLAN VNI 0x445, flows 0-7 priority, interleaved "
    "round robin in one live-frame run per trial, paced in the generator program; frames leave in bursts "
    "of `batch`",
    "generator": "dpp-pktgen -m on CPU 0 in the RAN namespace (BPF_PROG_TEST_RUN live frames, XDP_TX into ran0)",
    "node": "n3's receive (veth NAPI) runs on CPU 0 with the generator; the node's CPUs (cpu_sets) do the stack "
    "work: the kernel's VXLAN device decapsulates, IPv4 forwarding routes the inner GTP-U packets out of n6",
    "kernel": "no XDP on n3, GRO on, rps_cpus of n3 = the CPU set (the whole stack runs there, flows "
    "spread by hash); nothing goes to the alternative node",
    "netapp": "the NetApp (NetAppService, the demo's configuration) attached natively to n3: priority services "
    "steered through CPUMAP to the node's CPUs other than CPU 0, metered against capacity_pps per CPU, overflow "
    "forwarded (MAC/IP rewrite, redirect) to the alternative node; best effort passed on CPU 0 within its "
    "capacity, else forwarded; CPU 0 marked overloaded when not one of the node's CPUs",
    "sinks": "XDP counter on core0 and alt0 (per flow by TEID, then XDP_DROP)",
    "loss": "lost = sent - counted at core0 - counted at alt0, per flow; zero loss: lost == 0 (RFC 2544)",
    "zero_loss": "binary search from the generator's unpaced maximum against the system down to `resolution`; "
    "a trial passes when nothing is lost (and the counts are valid); the result is the offered rate of the "
    "fastest passing trial; limited_by 'generator': even the generator's maximum passed, so the result is a "
    "lower bound set by the generator, which shares CPU 0 with the node",
    "capacity": "capacity_pps of a CPU = capacity_margin x its zero-loss rate on the path its packets take with "
    "the NetApp, per size: a steering target's from the NetApp alone on it, unmetered (the priority part); "
    "CPU 0's from the kernel path with RPS on CPU 0 alone (unless capacity_pps was given)",
}


def machine_info() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in _read("/proc/cpuinfo").splitlines()
            if "model name" in line
        ),
        "",
    )
    clang = subprocess.run(["clang", "--version"], check=False, capture_output=True, text=True).stdout
    return {
        "cpu": model,
        "cpus": len([line for line in _read("/proc/cpuinfo").splitlines() if line.startswith("processor")]),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "clang": clang.splitlines()[0] if clang else "",
        "netdev_max_backlog": int(_read("/proc/sys/net/core/netdev_max_backlog") or 0),
        "load_average": _read("/proc/loadavg").split()[:3],
    }


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _find(results: Sequence[dict], size: int, ncpus: int, system: str) -> dict | None:
    return next(
        (r for r in results if r["size"] == size and len(r["cpus"]) == ncpus and r["system"] == system), None
    )


def summary(results: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per (size, CPUs): both systems' zero-loss rates and their ratio. The target is
    judged only where the generator has a CPU of its own: where it shares one of the node's CPUs,
    both systems are capped by the generator's share, and the ratio says nothing about the node."""
    rows = []
    for size, ncpus in sorted({(r["size"], len(r["cpus"])) for r in results}):
        row: dict[str, Any] = {"size": size, "frame_bytes": frame_bytes(size), "cpus": ncpus}
        for system in ("kernel", "netapp"):
            entry = _find(results, size, ncpus, system)
            if entry is not None:
                row.update(_system_columns(system, entry["zero_loss"]))
                row.update(_sweep_check(system, entry))
                row["generator_on_node_cpu"] = GENERATOR_CPU in entry["cpus"]
        if row.get("kernel_pps") and "netapp_pps" in row:
            row["ratio"] = round(row["netapp_pps"] / row["kernel_pps"], 2)
            if not row["generator_on_node_cpu"]:
                row["target_met"] = row["ratio"] >= TARGET_RATIO
        rows.append(row)
    return rows


def target(rows: Sequence[dict]) -> dict[str, Any]:
    """Whether the NetApp carried TARGET_RATIO x the kernel path wherever that was measured."""
    judged = [row["target_met"] for row in rows if "target_met" in row]
    return {
        "ratio": TARGET_RATIO,
        "rows_judged": len(judged),
        "met_where_judged": bool(judged) and all(judged),
        "rows_not_judged": sum(1 for row in rows if "ratio" in row and "target_met" not in row),
        "not_judged_because": "the generator runs on one of the node's CPUs (a machine with more CPUs "
        "gives it one of its own)",
    }


def _system_columns(system: str, zero_loss: dict[str, Any]) -> dict[str, Any]:
    """A system's zero-loss rate, what stopped the search, and from the trial that set the rate:
    how much of the asked rate the generator offered, and where the traffic went."""
    columns = {f"{system}_pps": round(zero_loss["pps"]), f"{system}_limited_by": zero_loss["limited_by"]}
    best = next(
        (t for t in zero_loss.get("trials", []) if t["passed"] and t["offered_pps"] == zero_loss["pps"]), None
    )
    if best is not None:
        rates = best["rates_pps"]
        columns[f"{system}_offered_of_asked"] = round(best["offered_pps"] / best["target_pps"], 3)
        columns[f"{system}_priority_delivered_pps"] = round(rates["priority"]["delivered"])
        columns[f"{system}_forwarded_pps"] = round(rates["total"]["forwarded"])
    return columns


def _sweep_check(system: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Did the zero-loss rate repeat? The sweep's trials at or below it, and how many of them lost
    frames anyway (a search reports a rate that passed once)."""
    if "sweep" not in entry:
        return {}
    below = [t for t in entry["sweep"] if t["offered_pps"] <= entry["zero_loss"]["pps"] and t["valid"]]
    lossy = [t for t in below if not t["zero_loss"]]
    return {f"{system}_sweep_trials_at_or_below": len(below), f"{system}_sweep_lossy_at_or_below": len(lossy)}


def document(
    results: list[dict], calibration: list[dict], settings: dict, argv: list[str], duration_s: float
) -> dict[str, Any]:
    rows = summary(results)
    return {
        "benchmark": "throughput",
        "command": " ".join(["python -m bench.throughput", *argv]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(duration_s, 1),
        "machine": machine_info(),
        "settings": settings,
        "method": METHOD,
        "summary": rows,
        "target": target(rows),
        "results": results,
        "calibration": calibration,
    }


def format_table(result: dict[str, Any]) -> str:
    """The summary; * marks a rate set by a trial in which the generator offered less than
    GENERATOR_SHORT of the rate asked for (its CPU was busy with something else), ! a rate that
    did not repeat (a sweep trial at or below it lost frames)."""
    lines = ["size  frame  CPUs   kernel Mpps (limit)   NetApp Mpps (limit)   ratio"]
    for row in result["summary"]:
        kernel = _cell(row, "kernel")
        netapp = _cell(row, "netapp")
        ratio = _ratio(row)
        lines.append(
            f"{row['size']:>4}  {row['frame_bytes']:>5}  {row['cpus']:>4}   {kernel:<20}  {netapp:<20}  {ratio}"
        )
    lines.append(
        f"* the generator offered less than {GENERATOR_SHORT:.0%} of the rate asked for in that trial"
    )
    lines.append("! not repeatable: a sweep trial at or below that rate lost frames")
    lines.append("(gen) the generator runs on one of the node's CPUs: not a measurement of the node")
    return "\n".join(lines)


def _ratio(row: dict) -> str:
    if "ratio" not in row:
        return "-"
    return f"{row['ratio']:.1f}x" + (" (gen)" if row.get("generator_on_node_cpu") else "")


def markdown_table(result: dict[str, Any]) -> str:
    """The summary as the README shows it (tests/bench checks that the README's table is this)."""
    lines = ["| size (B) | node CPUs | kernel path | NetApp | NetApp / kernel |", "|---|---|---|---|---|"]
    for row in result["summary"]:
        cells = [_markdown_cell(row, system) for system in ("kernel", "netapp")]
        ratio = "-" if "ratio" not in row else f"{_ratio_bound(row)}{row['ratio']:.1f}"
        if row.get("generator_on_node_cpu") and "ratio" in row:
            ratio += " (generator on a node CPU)"
        lines.append(f"| {row['size']} | {row['cpus']} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


def _ratio_bound(row: dict) -> str:
    """≥ when the NetApp's rate is a lower bound and the kernel path's is not."""
    lower = row.get("netapp_limited_by") == "generator" and row.get("kernel_limited_by") != "generator"
    return "≥" if lower else ""


def _markdown_cell(row: dict, system: str) -> str:
    if f"{system}_pps" not in row:
        return "-"
    prefix = "≥" if row[f"{system}_limited_by"] == "generator" else ""
    return f"{prefix}{row[f'{system}_pps'] / 1e6:.2f}"


def _cell(row: dict, system: str) -> str:
    if f"{system}_pps" not in row:
        return "-"
    bound = row[f"{system}_limited_by"]
    prefix = ">=" if bound == "generator" else ""
    short = "*" if row.get(f"{system}_offered_of_asked", 1.0) < GENERATOR_SHORT else ""
    short += "!" if row.get(f"{system}_sweep_lossy_at_or_below") else ""
    return f"{prefix}{row[f'{system}_pps'] / 1e6:.3f}{short} ({bound})"


def dumps(result: dict[str, Any]) -> str:
    """Indented JSON with every trial, and every list of numbers, on one line: a run holds
    hundreds of trials."""
    trials: list[str] = []

    def mark(value: Any) -> Any:
        if isinstance(value, dict) and "offered_pps" in value and "classes" in value:
            trials.append(json.dumps(value))
            return f"@trial{len(trials) - 1}@"
        if isinstance(value, dict):
            return {key: mark(item) for key, item in value.items()}
        if isinstance(value, list):
            return [mark(item) for item in value]
        return value

    text = json.dumps(mark(result), indent=2)
    text = re.sub(r"\[\s+([-+0-9.eE,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    return re.sub(r'"@trial(\d+)@"', lambda m: trials[int(m.group(1))], text)


def write_outputs(result: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(out.suffix + ".tmp")
    partial.write_text(dumps(result) + "\n")
    partial.replace(out)
    print(format_table(result))
    try:
        from bench.throughput import plots
    except ImportError:
        print(f"\nwrote {out} (no plots: matplotlib not importable)")
        return
    written = plots.draw(result, out)
    print(f"\nwrote {out} and {', '.join(str(path) for path in written)}")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.throughput.report RESULT.json`: the README's table of a result document."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.throughput.report", description=main.__doc__)
    parser.add_argument("result", type=Path)
    args = parser.parse_args(argv)
    print(markdown_table(json.loads(args.result.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
