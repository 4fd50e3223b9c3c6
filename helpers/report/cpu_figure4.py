"""Figure 4 for a CPU: each deployment's verify overhead beside the paper's three devices, and the speedup it
would give.

The paper profiles only the verify overhead per device; acceptance does not depend on the device (its Sec. 3.4). So
the projected speedup at N is tokens/step(N) / (1 + overhead(N)), with two numerators, each labelled:
- the paper's tokens/step, at the tree sizes where the paper reports it (its Figure 4 ceiling at N = 16, 32, 64;
  no value is interpolated or extrapolated);
- the miniature's own (the run's calibrated expected tokens/step per N), where given.

Input: `measure.deployments.call_grid`'s dict ({deployment: {"ar_ms", "by_n": {N: {"overhead", ...}}}}).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from helpers.measure.machine import measured_on
from helpers.report.paper import PAPER
from helpers.report.paper_figures import paper_figure4
from helpers.report.figure_record import mark
from helpers.report.plots import powers_of_two, readable_ticks
from helpers.report.projection import (PAPER_N, ceiling_provenance, fastest_exact_ar, projection_at,
                                       projection_sentence, speedups)
from helpers.report.tables import markdown

PAPER_DEVICE_NAMES = {"iphone_17_pro_max": "iPhone 17 Pro Max (ANE, W8A16)", "macbook_m3_pro": "MacBook M3 Pro (ANE, W8A16)",
                      "iphone_12": "iPhone 12 (ANE, W8A16)"}


def paper_points() -> dict[int, float]:
    """The paper's tokens/step where it reports one: its Figure 4 ceiling, {N: tokens/step} at N = 16, 32, 64."""
    return {int(k): float(v) for k, v in PAPER["figure4_latency"]["acceptance_ceiling"].items()}


def paper_tokens_per_step(n: int) -> float | None:
    """The paper's tokens/step at tree size N where the paper reports it, else None (never interpolated)."""
    return paper_points().get(int(n))


def deployments_of(grid: dict) -> dict[str, dict]:
    return {k: v for k, v in grid.items() if isinstance(v, dict) and "by_n" in v and "ar_ms" in v}


def projected(grid: dict, tokens_per_step: dict[int, float] | None = None) -> dict:
    """Per deployment: {"ar_ms", "by_n": {N: {"q", "call_ms", "overhead", "paper_speedup", "mini_speedup",
    "paper_vs_fastest_ar"}}, "best_n" (by paper_speedup, else mini_speedup), "best_speedup"} (speedups None where no
    numerator). paper_speedup is over the deployment's own AR call; paper_vs_fastest_ar: the paper's tokens/step x
    (the fastest AR call of the grid, `projection.fastest_exact_ar`) / this call, the speedup over the fastest
    AR call this CPU has."""
    out = {}
    fastest_ar = fastest_exact_ar(grid)[1]
    for name, d in deployments_of(grid).items():
        rows = {}
        for n, r in d["by_n"].items():
            n = int(n)
            paper, mini = paper_tokens_per_step(n), (tokens_per_step or {}).get(n)
            on_paper = speedups(paper, r, fastest_ar) if paper else (None, None)
            rows[n] = {**r, "paper_speedup": on_paper[0], "paper_vs_fastest_ar": on_paper[1],
                       "mini_speedup": speedups(mini, r, fastest_ar)[0] if mini else None}
        key = "paper_speedup" if any(r["paper_speedup"] for r in rows.values()) else "mini_speedup"
        best = _argmax(rows, key)
        out[name] = {"ar_ms": d["ar_ms"], "by_n": rows, "best_n": best, "best_by": key,
                     "best_speedup": rows[best][key] if best else None}
    return out


def figure4_rows(grid: dict, device: str, tokens_per_step: dict[int, float] | None = None) -> list[dict]:
    """Figure 4 as a table: the paper's devices (as reported), then each deployment on `device`: AR call ms, overhead
    at N = 16 and 32, projected speedup at N = 32 and at its best N of the paper's 16, 32, 64 (paper tokens/step), and its best against
    the fastest exact AR call of the grid; with `tokens_per_step` (the miniature's measured curve), also its best N
    and speedup with that numerator (paper rows: "-"). A paper overhead the paper does not print (ceiling / speedup
    - 1) says "(derived)"; a projection at N = 32 uses the inferred ceiling and says "(inferred)"."""
    paper = paper_figure4(PAPER["figure4_latency"])
    rows = []
    for key, d in PAPER["figure4_latency"]["devices"].items():
        dev = paper["devices"][key]
        best = max(dev["speedup"], key=dev["speedup"].get)
        rows.append({"device": PAPER_DEVICE_NAMES.get(key, key), "AR call ms": d["ar_call_ms"],
                     "overhead N=16": _paper_overhead(dev, 16), "overhead N=32": _paper_overhead(dev, 32),
                     "speedup N=32": _fmt(dev["speedup"].get(32), "x"),
                     "best N (speedup)": f"{best} ({dev['speedup'][best]:.2f}x)", "best N vs fastest exact AR": "-",
                     **({"best N (miniature's tokens/step)": "-"} if tokens_per_step else {}), "source": "paper"})
    for name, d in projected(grid, tokens_per_step).items():
        r = d["by_n"]
        rows.append({"device": f"{device}: {name}", "AR call ms": round(d["ar_ms"], 2),
                     "overhead N=16": _fmt(_at(r, 16, "overhead")), "overhead N=32": _fmt(_at(r, 32, "overhead")),
                     "speedup N=32": _fmt(_at(r, 32, "paper_speedup"), "x") + _inferred(32, _at(r, 32, "paper_speedup")),
                     "best N (speedup)": (f"{d['best_n']} ({d['best_speedup']:.2f}x)" + _inferred(d["best_n"], 1))
                     if d["best_n"] else "-",
                     "best N vs fastest exact AR": _best(r, "paper_vs_fastest_ar") + _inferred(
                         _argmax(r, "paper_vs_fastest_ar"), 1),
                     **({"best N (miniature's tokens/step)": _best(r, "mini_speedup")} if tokens_per_step else {}),
                     "source": "measured overhead x paper tokens/step"})
    return rows


def _paper_overhead(dev: dict, n: int) -> str:
    """A paper device's overhead at N: as printed, or "(derived)" where computed from its speedup and the ceiling."""
    if n in dev["overhead"]:
        return _fmt(dev["overhead"][n])
    return _fmt(dev["derived"][n]) + " (derived)" if n in dev["derived"] else "-"


def _inferred(n: int | None, value) -> str:
    """" (inferred)" after a projection whose numerator is the paper's inferred ceiling at N, else ""."""
    return " (inferred)" if value is not None and n is not None and ceiling_provenance(n) == "inferred" else ""


def _argmax(rows: dict, key: str) -> int | None:
    """The N whose row has the largest `key` (rows without one left out), None if none has it."""
    scored = [n for n in rows if rows[n][key]]
    return max(scored, key=lambda n: rows[n][key]) if scored else None


def _best(rows: dict, key: str) -> str:
    n = _argmax(rows, key)
    return "-" if n is None else f"{n} ({rows[n][key]:.2f}x)"


def _at(rows: dict, n: int, key: str):
    return rows[n][key] if n in rows else None


def _fmt(x, unit: str = "") -> str:
    return "-" if x is None else f"{x:.2f}{unit}" if unit else f"{x:+.3f}"


def overhead_figure(grid: dict, device: str):
    """1 + overhead against q = N + 1 (log-log) for every deployment on `device`, the paper's devices as points."""
    fig, ax = plt.subplots(figsize=(9.0, 4.2))
    for i, (name, d) in enumerate(deployments_of(grid).items()):
        rows = {int(n): r for n, r in d["by_n"].items()}                # int keys, or str ones read back from JSON
        ns = sorted(rows)
        ax.plot([1] + [n + 1 for n in ns], [1.0] + [1 + rows[n]["overhead"] for n in ns], marker="o",
                ms=3, color=f"C{i}", label=f"{name} (AR call {d['ar_ms']:.1f} ms)")
    paper = paper_figure4(PAPER["figure4_latency"])
    for j, (key, dev) in enumerate(paper["devices"].items()):
        for kind, marker, label in (("overhead", "*", "paper"), ("derived", "P", "derived from the paper")):
            if dev[kind]:
                sc = ax.scatter([n + 1 for n in dev[kind]], [1 + o for o in dev[kind].values()], marker=marker,
                                s=90, color=f"C{7 + j % 3}", zorder=3, label=f"{label}: {PAPER_DEVICE_NAMES.get(key, key)}")
                if kind == "derived":
                    mark(sc, "derived")
    ax.set(xscale="log", yscale="log", xlabel="query length q = N + 1 (tokens, log scale)",
           ylabel="1 + overhead (log scale)",
           title=f"Figure 4, {device}: what a verify call of q tokens costs")
    points = np.concatenate([line.get_xydata() for line in ax.get_lines()] + [c.get_offsets() for c in ax.collections])
    qs = sorted({int(round(q)) for q in points[:, 0]})
    if len(readable_ticks(ax, qs, prefer=[1] + [q for q in qs if q - 1 in paper["ceiling"]] +
                          [n + 1 for n in powers_of_two([q - 1 for q in qs])])) < len(qs):
        ax.set_xlabel("query length q = N + 1 (tokens, log scale; dotted: unlabelled q)")
    top = float(points[:, 1].max())
    yt = [v for v in (1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64) if v <= 1.1 * top]
    readable_ticks(ax, yt, axis="y", prefer=[1, 2, 4, 8, 16, 32, 64], min_inches=0.25)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def identical_frames(frames: dict, system: str) -> int | None:
    """How many of a speculative system's frames ("spec<N>@<deployment>") equal its deployment's own AR frames; None
    for any other system."""
    if not system.startswith("spec") or "+" in system:
        return None
    n, name = system.split("@")
    same = frames["identical"][name]["spec"]
    return same.get(int(n[4:]), same.get(n[4:]))


def frames_rows(frames: dict) -> list[dict]:
    """`measure.deployments.deployment_frames`'s systems as table rows, fastest first; a speculative loop's frames
    equal to its own AR loop's (same uniforms), counted."""
    def identical(k):
        same = identical_frames(frames, k)
        return "-" if same is None else f"{same}/{frames['frames']}"
    return [{"system": k, "frame ms": round(v["frame_ms"], 3), "tokens/step": v["tokens_per_step"],
             "identical to its AR": identical(k)}
            for k, v in sorted(frames["systems"].items(), key=lambda kv: kv[1]["frame_ms"])]


def exact_frames(frames: dict) -> dict:
    """The whole-frame comparison over our loops whose codes were measured lossless (a speculative loop whose every
    frame equals its own AR loop's): {"fastest_ar", "fastest_spec" (system names), "spec_over_ar" (fastest AR frame /
    fastest lossless speculative frame), "inexact_spec": the fastest speculative system with a differing frame and its
    ratio to the same AR baseline, or None}."""
    systems = {k: v["frame_ms"] for k, v in frames["systems"].items() if not k.startswith("official")}
    lossless = {k: ms for k, ms in systems.items()
                if k.startswith("ar@") or identical_frames(frames, k) in (None, frames["frames"])}
    ar = min((k for k in lossless if k.startswith("ar@")), key=lossless.get)
    spec = min((k for k in lossless if k.startswith("spec")), key=lossless.get)
    apart = {k: ms for k, ms in systems.items() if k.startswith("spec") and k not in lossless}
    other = min(apart, key=apart.get) if apart else None
    return {"fastest_ar": ar, "fastest_spec": spec, "spec_over_ar": lossless[ar] / lossless[spec],
            "inexact_spec": (other, lossless[ar] / apart[other]) if other else None}


def frames_sentence(frames: dict) -> str:
    """The miniature's whole frames per deployment in words, from `frames` (`deployment_frames`' dict)."""
    e = exact_frames(frames)
    text = (f"Among the lossless deployments the fastest AR loop is **{e['fastest_ar']}** and the fastest speculative "
            f"loop **{e['fastest_spec']}**: {e['spec_over_ar']:.2f}x the fastest lossless AR loop.")
    if e["inexact_spec"]:
        name, ratio = e["inexact_spec"]
        text += f" Apart, a frame differing from its AR frame: {name} at {ratio:.2f}x that same AR loop."
    return text + " " + identical_sentence(frames)


def identical_sentence(frames: dict) -> str:
    """How many speculative frames of each deployment equal its own AR frames (same uniforms), as a sentence."""
    return ("Speculative frames equal to the same deployment's AR frames (same uniforms): "
            + "; ".join(f"{name} " + ", ".join(f"N = {n}: {v} of {frames['frames']}" for n, v in same["spec"].items())
                        for name, same in frames["identical"].items()) + ".")


def report_lines(m: dict) -> list[str]:
    """report.md's sections from metrics: "figure4_cpu" (Figure 4 for this CPU beside the paper's devices) and
    "deployments" (the miniature's whole frames per deployment)."""
    out = []
    f4 = m.get("figure4_cpu")
    if f4:
        best = f4["projected"][f4["best"]]
        out += ["## Figure 4 for a CPU, at the 0.6B shape", "",
                measured_on(f4.get("environment"), f" (`make bench`, {f4['source']})") + ": p50 of the fused call "
                "(drafts, attention and heads included) at the exact shape of the 0.6B code predictor, random weights.",
                "", markdown(figure4_rows(f4["grid"], "measured")), "",
                "Projected speedup: the paper's tokens/step (where the paper gives it: N = "
                + ", ".join(f"{n}{' (inferred)' if ceiling_provenance(n) == 'inferred' else ''}" for n in paper_points())
                + ") / (1 + overhead), since acceptance does not depend on the device (the paper's Sec. 3.4); "
                f"over each deployment's own AR call the best is {f4['best']} at N = {best['best_n']}, "
                f"{best['best_speedup']:.2f}x. " + projection_sentence(projection_at(f4["grid"], PAPER_N)), ""]
        out += ["Where the call's time goes (" + f4["phases"]["deployment"] + ", p50 ms): "
                + "; ".join(f"N = {n}: call {r['call_ms']:.2f}, projections {r['projections_ms']:.2f}, attention and "
                            f"small ops {r['attention_and_small_ops_ms']:.2f}, heads and top-k {r['heads_ms']:.2f}"
                            for n, r in f4["phases"]["by_n"].items()) + ".", ""]
    dep = m.get("deployments")
    if dep:
        fr = dep["frames"]
        out += [f"## The miniature in every deployment ({dep['device']})", "", measured_on(dep.get("machine")) + ":", "",
                markdown(frames_rows(fr)), "",
                frames_sentence(fr) + f" Fastest official generate: {fr['official']}.", ""]
    return out


def best_projected(proj: dict) -> str:
    """The deployment of `projected(...)` with the largest best speedup (a deployment with none counts as 0)."""
    return max(proj, key=lambda k: proj[k]["best_speedup"] or 0)
