"""The figures of speed: the paper's Figure 4 redrawn from a run's latency sweep (speedup against N beside the
paper's devices, the call's cost against the query length) and where a round's time goes. Each function returns a
Figure (`helpers.report.plots.save` writes it); Figure 4 for a CPU at the 0.6B shape: `helpers.report.projection`.
"""

from __future__ import annotations

import numpy as np

from helpers.report.paper import PAPER_DEVICES, ceiling_provenance
from helpers.report.plots import mark, plt, powers_of_two, readable_ticks, tree_size_label


def speedup_and_overhead(by_n: dict, device: str, frames: int, calls: int, paper: dict | None = None):
    """Figure 4. by_n: {N: {"tokens_per_step", "realised_speedup", "overhead"[, "measured_speedup"]}} of this run
    on `device` (`latency.latency_metrics`'s "by_n"), measured over `frames` frames and `calls` calls per size;
    paper: `paper_figure4(...)`. Left: speedup vs N, each set of devices under its own acceptance ceiling (dashed).
    Right: call cost relative to the AR call, 1 + overhead, vs query length q = N + 1 (log-log)."""
    ns = sorted(int(n) for n in by_n)
    row = {int(n): r for n, r in by_n.items()}
    fig, (ax, ov) = plt.subplots(1, 2, figsize=(12, 4.2))
    ax.plot(ns, [row[n]["tokens_per_step"] for n in ns], ls="--", color="C0",
            label=f"this run: tokens/step (its ceiling), {frames} frames")
    ax.plot(ns, [row[n]["realised_speedup"] for n in ns], marker="s", color="C0", alpha=0.6,
            label=f"{device}: tokens/step / (1 + overhead)")
    if "measured_speedup" in row[ns[0]]:
        ax.plot(ns, [row[n]["measured_speedup"] for n in ns], marker="o", color="C0",
                label=f"{device}: measured, whole frames (median of {frames})")
    ov.plot([1] + [n + 1 for n in ns], [1.0] + [1.0 + row[n]["overhead"] for n in ns], marker="o", color="C0",
            label=f"{device} (p50 of {calls} calls)")
    if paper:
        pn = sorted(paper["ceiling"])
        # the paper's points as points: N = 16, 32, 64 are far apart, and a line between them would be an
        # interpolation the paper does not make
        printed = [n for n in pn if ceiling_provenance(n) == "paper"]
        ax.scatter(printed, [paper["ceiling"][n] for n in printed], marker="_", s=200, color="0.45",
                   label="paper: tokens/step (its ceiling)", zorder=3)
        inferred = [n for n in pn if ceiling_provenance(n) == "inferred"]
        if inferred:
            mark(ax.scatter(inferred, [paper["ceiling"][n] for n in inferred], marker="_", s=200, color="0.7",
                            label="inferred from the paper: ceiling (Table 2's tokens/step)", zorder=3), "inferred")
        for i, (name, d) in enumerate(paper["devices"].items(), start=1):
            color = f"C{i}"
            sp = sorted(d["speedup"])
            ax.scatter(sp, [d["speedup"][n] for n in sp], marker="D", color=color, zorder=3,
                       label=f"paper, Figure 4's formula: {PAPER_DEVICES.get(name, name)}")
            for key, marker, label in (("overhead", "D", "paper"), ("derived", "d", "derived from the paper")):
                if d[key]:
                    on = sorted(d[key])
                    sc = ov.scatter([n + 1 for n in on], [1.0 + d[key][n] for n in on], marker=marker, s=40,
                                    color=color, label=f"{label}: {PAPER_DEVICES.get(name, name)}", zorder=3)
                    if key == "derived":
                        mark(sc, "derived")
    ax.axhline(1.0, color="0.5", lw=0.8)
    paper_ns = sorted(paper["ceiling"]) if paper else []
    ticks = sorted(set(ns) | set(paper_ns))
    ax.set(xscale="log", ylabel="speedup over AR (x) / tokens per call",
           title="Speedup vs tree size, each under its own ceiling")
    ax.set_xlabel(tree_size_label(len(readable_ticks(ax, ticks, prefer=paper_ns + powers_of_two(ticks))) < len(ticks)))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ov.set(xscale="log", yscale="log", xlabel="query length q = N + 1 (tokens, log scale)",
           ylabel="1 + overhead (call / AR call, log scale)", title="Verify-call cost vs query length")
    points = np.concatenate([c.get_offsets() for c in ov.collections] + [line.get_xydata() for line in ov.get_lines()])
    qs = sorted({int(q) for q in points[:, 0]})
    prefer = [1] + [n + 1 for n in paper_ns + powers_of_two([q - 1 for q in qs])]       # the paper's q first
    if len(readable_ticks(ov, qs, prefer=prefer)) < len(qs):
        ov.set_xlabel("query length q = N + 1 (tokens, log scale; dotted: unlabelled q)")
    top = float(points[:, 1].max())
    yt = [v for v in (1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32) if v <= 1.1 * top]
    readable_ticks(ov, yt, axis="y", prefer=[1, 2, 4, 8, 16, 32], min_inches=0.25)
    ov.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def round_phases(profile: dict, device: str):
    """Where the time goes (`profile.round_profile`): ms per AR step and per speculative round, stacked by
    phase (round work = draft + walk + commit), AR step / round written above each speculative bar."""
    parts = {"layers": ("layers",), "heads (+ drafts)": ("heads",), "sample": ("sample",),
             "round work: draft, walk, commit": ("draft", "walk", "commit")}
    trees = dict(sorted(profile["trees"].items(), key=lambda kv: int(kv[0])))     # by N, whatever the key type
    rows = {"AR\nstep": profile["ar"], **{str(n): r for n, r in trees.items()}}
    fig, ax = plt.subplots(figsize=(max(6.5, 3.5 + 0.45 * len(rows)), 3.6))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for label, phases in parts.items():
        ms = np.array([sum(r.get(p, 0.0) for p in phases) for r in rows.values()])
        ax.bar(x, ms, bottom=bottom, label=label)
        bottom += ms
    for i, r in enumerate(trees.values(), start=1):
        ax.annotate(f"{r['ratio']:.2f}", (i, bottom[i]), ha="center", va="bottom", fontsize=8)
    ax.axhline(bottom[0], color="0.3", lw=0.8, ls="--", label="one AR step")
    ax.set_xticks(x, list(rows), rotation=90 if len(rows) > 14 else 0)
    ax.set(xlabel="speculative round at tree size N (first bar: one AR step)", ylabel="ms per AR step / per round",
           ylim=(0, 1.1 * bottom.max()), title=f"Where a round's time goes on {device} (above: AR step / round)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig
