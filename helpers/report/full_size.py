"""The miniature at the real code predictor's size (metrics.json "full_size", `helpers.measure.full_size_frames`):
whole frames per deployment in words and as a figure, labelled with the machine they were measured on (notebook 06,
report.md). The engines beside it: `helpers.report.nb06_engines`.
"""

from __future__ import annotations

import numpy as np

from helpers.measure.deployments import DEPLOYMENTS
from helpers.measure.full_size_frames import spread_words
from helpers.report.plots import plt


def deployments(table: dict) -> list[str]:
    """The table's deployments in the order of `measure.deployments.DEPLOYMENTS`."""
    order = list(DEPLOYMENTS)
    return sorted(table["calls"], key=lambda d: order.index(d) if d in order else len(order))


def speculative(table: dict, name: str) -> dict[int, dict]:
    """{N: system row} of one deployment's speculative loops."""
    return {int(s["n"]): s for s in table["systems"].values() if s["deployment"] == name and s["n"]}


def best_of(table: dict, name: str) -> tuple[int, dict]:
    """(N, row) of a deployment's fastest lossless speculative loop (its fastest loop where none is lossless)."""
    rows = speculative(table, name)
    pool = {n: r for n, r in rows.items() if r["lossless"]} or rows
    n = min(pool, key=lambda k: pool[k]["frame_ms"])
    return n, pool[n]


def full_size_md(table: dict, where: str) -> str:
    """What the measured frames say: the fastest AR and lossless speculative loops and their ratio; per deployment its
    own speedup beside its tokens/step and its verify call over its AR call, both measured (the quantity that decides
    it); the frame model's error and the projection through it, each called model."""
    s = table["systems"]
    ar, spec = table["fastest_ar"], table["fastest_spec"]
    shape = table["shape"]
    text = [f"{where}. The miniature at the real code predictor's shape (hidden {shape['hidden_size']}, "
            f"{shape['num_layers']} layers, {shape['num_heads']}/{shape['num_kv_heads']} heads of {shape['head_dim']}, "
            f"MLP {shape['intermediate_size']}; vocabulary {shape['vocab_size']}), {table['frames']} frames per "
            f"system. The fastest AR loop of any deployment is **{ar}** ({s[ar]['frame_ms']:.1f} ms a frame)."]
    if spec:
        text.append(f"The fastest lossless speculative loop is **{spec}** ({s[spec]['frame_ms']:.1f} ms at "
                    f"{s[spec]['tokens_per_step']:.2f} tokens/step): **{table['speedup']:.2f}x** that AR loop, "
                    f"measured on whole frames{spread_words(table)}.")
    per, costs = [], []
    for name in deployments(table):
        n, r = best_of(table, name)
        own = s[f"ar@{name}"]["frame_ms"] / r["frame_ms"]
        calls = table["calls"][name]
        verify = calls["by_n"].get(n, calls["by_n"].get(str(n)))["call_ms"] / calls["ar_ms"]
        costs.append(verify)
        per.append(f"{name} {own:.2f}x its own AR loop at N = {n} ({r['tokens_per_step']:.2f} tokens/step; its verify "
                   f"call, timed alone, {verify:.2f} of its AR calls)")
    text.append("Each deployment against its own AR loop, at its best N: " + "; ".join(per) + ". Speculation "
                "pays where a verify call costs little more than an AR call: where the call reads its weights once "
                "whatever its rows (a bandwidth-bound kernel); where each added row costs arithmetic, a verify call "
                f"costs more (here up to {max(costs):.2f} AR calls) and the saved calls do not pay.")
    identical = sum(r["identical"] for r in s.values() if r["n"])
    total = sum(r["frames"] for r in s.values() if r["n"])
    text.append(f"Speculative frames equal to their own deployment's AR frames: {identical} of {total}.")
    worst = max(m["max_error"] for m in table["model"].values())
    proj = table.get("projected") or {}
    if proj:
        best = max(((name, int(n), p) for name, by_n in proj.items() for n, p in by_n.items()),
                   key=lambda x: x[2]["speedup"])
        text.append(f"A frame model fitted on these frames (per frame + rounds x (b x the call + round work), three "
                    f"numbers per deployment) misses each loop's mean frame by at most {worst:.1%}; through the model "
                    f"the paper's tokens/step {best[2]['tokens_per_step']:.2f} at N = {best[1]} would give "
                    f"{best[0]} **{best[2]['speedup']:.2f}x projected** against the fastest AR loop (the model's "
                    "projection, not a measurement: the miniature's codec caps its own tokens/step).")
    return " ".join(text)


def full_size_figure(table: dict):
    """Milliseconds a frame per deployment: the AR loop and the speculative loop per N (bars), the fastest AR loop of
    any deployment as a line."""
    names = deployments(table)
    sizes = sorted({int(s["n"]) for s in table["systems"].values()})
    fig, ax = plt.subplots(figsize=(9.0, 3.8))
    width = 0.8 / len(sizes)
    x = np.arange(len(names))
    for i, n in enumerate(sizes):
        ms = [table["systems"][f"ar@{d}" if n == 0 else f"spec{n}@{d}"]["frame_ms"] for d in names]
        ax.bar(x + (i - (len(sizes) - 1) / 2) * width, ms, width, label="AR" if n == 0 else f"speculative N = {n}",
               color=f"C{i}")
    best = table["systems"][table["fastest_ar"]]["frame_ms"]
    ax.axhline(best, color="k", ls="--", lw=1, label=f"fastest AR ({table['fastest_ar']})")
    ax.set_xticks(x, names)
    ax.set(ylabel="ms per frame (p50)", title="The miniature at the real code predictor's size: whole frames")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def full_size_caption(where: str) -> str:
    """The caption of `full_size_figure`."""
    return (f"{where}. Milliseconds per frame at the real code predictor's shape, per deployment: the AR loop and the "
            "speculative loop per N; the dashed line is the fastest AR loop of any deployment.")


def full_size_skipped(backend: str, device: str, frames: int) -> str:
    """Why notebook 06 skips the full-size frames."""
    return (f"full-size frames skipped (backend {backend}, device {device}, full_size_frames {frames}): they time "
            "the miniature's CPU deployments at the real shape")
