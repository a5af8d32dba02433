"""The plots of a throughput run (matplotlib, no display needed).

throughput.png: zero-loss throughput per size, both systems, each CPU count; hatched bars are lower
bounds (the generator, not the system, stopped the search). throughput_sweep.png: the paper's
Fig. 4/5 shape, one panel per (size, CPUs, system): priority delivered at the core, best effort
delivered at the core, forwarded to the alternative node and lost, against the offered load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SYSTEMS = ("kernel", "netapp")
LABELS = {"kernel": "kernel path", "netapp": "NetApp"}
COLOURS = {
    ("kernel", 1): "#9ecae1",
    ("kernel", 2): "#3182bd",
    ("netapp", 1): "#fdae6b",
    ("netapp", 2): "#e6550d",
}
# label, value of a trial's rates, colour, line style, line width (wide lines first: where the kernel
# path delivers both classes alike, the thin best-effort line stays visible on the priority line)
SERIES = (
    ("priority delivered", lambda r: r["priority"]["delivered"], "#2ca02c", "-", 3.0),
    ("best effort delivered", lambda r: r["best_effort"]["delivered"], "#1f77b4", "-", 1.0),
    ("forwarded to alternative", lambda r: r["total"]["forwarded"], "#ff7f0e", "--", 1.2),
    ("lost", lambda r: r["total"]["lost"], "#d62728", ":", 1.5),
)


def draw(result: dict[str, Any], out: Path) -> list[Path]:
    bars, sweep = out.with_suffix(".png"), out.with_name(out.stem + "_sweep.png")
    written = [_zero_loss_bars(result, bars)]
    if any("sweep" in entry for entry in result["results"]):
        written.append(_sweeps(result, sweep))
    return written


def _zero_loss_bars(result: dict[str, Any], path: Path) -> Path:
    rows = result["summary"]
    sizes = sorted({row["size"] for row in rows})
    groups = sorted({(system, row["cpus"]) for row in rows for system in SYSTEMS if f"{system}_pps" in row})
    width = 0.8 / max(len(groups), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(sizes)), 4.5))
    for g, (system, ncpus) in enumerate(groups):
        for s, size in enumerate(sizes):
            row = next((r for r in rows if r["size"] == size and r["cpus"] == ncpus), None)
            if row is None or f"{system}_pps" not in row:
                continue
            bound = row[f"{system}_limited_by"] == "generator"
            ax.bar(
                s + (g - (len(groups) - 1) / 2) * width,
                row[f"{system}_pps"] / 1e6,
                width,
                color=COLOURS.get((system, ncpus), "grey"),
                hatch="//" if bound else None,
                edgecolor="black",
                linewidth=0.4,
                label=f"{LABELS[system]}, {ncpus} CPU{'s' if ncpus > 1 else ''}" if s == 0 else None,
            )
            if system == "netapp" and "ratio" in row:
                shared = "\n(gen)" if row.get("generator_on_node_cpu") else ""
                ax.annotate(f"{row['ratio']:.1f}x{shared}", (s + (g - (len(groups) - 1) / 2) * width, row["netapp_pps"] / 1e6),
                            ha="center", va="bottom", fontsize=7)  # fmt: skip
    ax.set_xticks(range(len(sizes)), [f"{s} B\n({s + 108} B frame)" for s in sizes])
    ax.set_ylabel("zero-loss throughput (Mpps)")
    ax.set_title("Zero-loss throughput (RFC 2544); hatched: lower bound set by the generator;\n"
                 "(gen): the generator runs on one of the node's CPUs", fontsize=10)  # fmt: skip
    ax.set_ylim(top=ax.get_ylim()[1] * 1.15)  # room for the legend above the tallest bar
    ax.legend(fontsize=8, ncol=4, loc="upper center")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _sweeps(result: dict[str, Any], path: Path) -> Path:
    entries = [e for e in result["results"] if "sweep" in e]
    sizes = sorted({e["size"] for e in entries})
    columns = sorted({(len(e["cpus"]), e["system"]) for e in entries})
    fig, axes = plt.subplots(len(sizes), len(columns), figsize=(3.4 * len(columns), 2.6 * len(sizes)),
                             squeeze=False, sharex="row", sharey="row")  # fmt: skip
    for r, size in enumerate(sizes):
        for c, (ncpus, system) in enumerate(columns):
            ax = axes[r][c]
            entry = next((e for e in entries if e["size"] == size and len(e["cpus"]) == ncpus and e["system"] == system), None)  # fmt: skip
            if entry is not None:
                _sweep_panel(ax, entry)
            ax.set_title(f"{size} B, {LABELS[system]}, {ncpus} CPU{'s' if ncpus > 1 else ''}", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            if r == len(sizes) - 1:
                ax.set_xlabel("offered (Mpps)", fontsize=8)
            if c == 0:
                ax.set_ylabel("Mpps", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(SERIES), fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _sweep_panel(ax: Any, entry: dict[str, Any]) -> None:
    trials = sorted(entry["sweep"], key=lambda t: t["offered_pps"])
    offered = [t["offered_pps"] / 1e6 for t in trials]
    for label, pick, colour, style, width in SERIES:
        ax.plot(offered, [pick(t["rates_pps"]) / 1e6 for t in trials], style, color=colour, label=label,
                marker=".", markersize=3, linewidth=width)  # fmt: skip
    zero = entry["zero_loss"]["pps"] / 1e6
    ax.axvline(zero, color="grey", linewidth=0.8, linestyle="-.")
