"""The 0.6B shape projected, and Figure 4 for a CPU, as tables, a figure and sentences (notebook 06, report.md, the
README).

- The projection, told one way everywhere: the paper's own tokens/step at a tree size N it gives
  (`helpers.report.paper`), over this CPU's measured call, against the fastest EXACT AR call of the same grid (`make
  bench`'s `cpu_0.6b.json`: {name: {"ar_ms", "by_n": {N: {"q", "call_ms", "overhead"}}}, "phases", "environment",
  ...}). No kernel lets a row depend on the call's other rows (w8a8 quantises each row on its own int8 grid,
  `helpers.method.kernels`), so the baseline is the fastest AR call of any deployment; whether whole speculative
  frames equal their AR frames is measured where frames are timed (`helpers.report.deployments.exact_frames`), never
  assumed.
- Figure 4 for a CPU: the paper profiles only the verify overhead per device, and acceptance does not depend on the
  device (its Sec. 3.4), so the projected speedup at N is tokens/step(N) / (1 + overhead(N)), with two numerators,
  each labelled: the paper's tokens/step where it reports one (no value interpolated), and the miniature's own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from helpers.measure.machine import measured_on
from helpers.measure.speedup import formula
from helpers.report.deployments import phase_split_sentence
from helpers.report.paper import (PAPER, PAPER_DEVICE_NAMES, PAPER_N, ceiling_provenance, paper_figure4,
                                  paper_points, paper_speedup, paper_tokens_per_step)
from helpers.report.plots import mark, plt, powers_of_two, readable_ticks
from helpers.report.tables import markdown


def fastest_exact_ar(grid: dict) -> tuple[str, float]:
    """(name, ms) of the fastest AR call of the grid (any deployment: no kernel lets a row depend on the call's other rows)."""
    exact = {k: v["ar_ms"] for k, v in grid.items() if isinstance(v, dict) and "ar_ms" in v}
    if not exact:
        raise ValueError(f"no deployment in the grid: {sorted(grid)}")
    name = min(exact, key=exact.get)
    return name, exact[name]


def speedups(tokens_per_step: float, call: dict, fastest_exact_ar_ms: float) -> tuple[float, float]:
    """The projection of one call ({"call_ms", "overhead"}) with `tokens_per_step`: (over its own AR call,
    over the fastest AR call of its grid). The one place both ratios are computed."""
    return (formula(tokens_per_step, 1 + call["overhead"]),
            formula(tokens_per_step, call["call_ms"] / fastest_exact_ar_ms))


def projection_at(grid: dict, n: int = PAPER_N) -> dict:
    """The projected speedup at N for every deployment of `grid` ({name: {"ar_ms", "by_n": {N: {"call_ms",
    "overhead"}}}}) that has N, with the paper's tokens/step at N:
    {"n", "tokens_per_step", "source" ("paper" | "inferred"), "baseline": (name, ms) the fastest AR call of the grid,
     "rows": {name: {"call_ms", "over_own_ar", "over_fastest_exact_ar"}}, "best": the deployment with the largest
     over_fastest_exact_ar}. Raises where the paper gives no tokens/step at N."""
    source = ceiling_provenance(n)
    if source is None:
        raise ValueError(f"the paper gives no tokens/step at N = {n}: a projection uses the paper's own points only")
    tps = paper_tokens_per_step(n)
    base_name, base_ms = fastest_exact_ar(grid)
    rows = {}
    for name, d in grid.items():
        if not (isinstance(d, dict) and "by_n" in d and "ar_ms" in d):
            continue
        r = {int(k): v for k, v in d["by_n"].items()}.get(int(n))
        if r:
            own, fastest = speedups(tps, r, base_ms)
            rows[name] = {"call_ms": r["call_ms"], "over_own_ar": own, "over_fastest_exact_ar": fastest}
    best = max(rows, key=lambda k: rows[k]["over_fastest_exact_ar"]) if rows else None
    return {"n": int(n), "tokens_per_step": tps, "source": source, "baseline": (base_name, base_ms), "rows": rows,
            "best": best}


def tokens_label(p: dict) -> str:
    """How the numerator is named: "the paper's tokens/step 2.25", or "the paper's tokens/step 2.47 (inferred)" where
    Figure 4 does not print it (2.47 is Table 2's value at N = 32)."""
    return f"the paper's tokens/step {p['tokens_per_step']:.2f}" + (" (inferred)" if p["source"] == "inferred" else "")


def projection_sentence(p: dict) -> str:
    """The projection in words, every number from `p` (`projection_at`): the best deployment against the fastest AR
    call, its own-AR figure beside it."""
    base, ms = p["baseline"]
    best = p["rows"][p["best"]]
    text = (f"Projected at N = {p['n']} with {tokens_label(p)}: the fastest deployment's call ({p['best']}, "
            f"{best['call_ms']:.1f} ms) gives **{best['over_fastest_exact_ar']:.2f}x** against the fastest AR "
            f"call of the same grid ({base}, {ms:.2f} ms); against its own AR call it would be "
            f"{best['over_own_ar']:.2f}x" + (", a figure that flatters its slower AR call." if best["over_own_ar"] >
                                            best["over_fastest_exact_ar"] + 0.005 else "."))
    return text


BENCH_FILES = (Path("outputs/bench/cpu_0.6b.json"), Path("outputs/bench-reference/cpu_0.6b.json"))


def bench_file(candidates=BENCH_FILES) -> Path | None:
    """The 0.6B-shape measurement 06 reads: a fresh `make bench` (outputs/bench/) where there is one, else the
    committed reference (outputs/bench-reference/); None where neither exists."""
    return next((Path(f) for f in candidates if Path(f).is_file()), None)


def figure4_md(real: dict, where: str, m3: dict) -> str:
    """The 0.6B shape in words: the projection at the paper's N against the fastest AR call of the grid
    (`projection_at`), the overheads of that deployment beside the M3 Pro's, the phase split as its own measurement
    (`phase_split_sentence`) and the call's phases in ms and against the AR call's."""
    p = projection_at(real, PAPER_N)
    d = {int(k): v for k, v in real[p["best"]]["by_n"].items()}
    flags = (real.get("environment") or {}).get("cpu_flags", [])
    phases = real["phases"]
    ar = phases["by_n"].get("0") or phases["by_n"].get(0)
    text = (f"{where}. " + projection_sentence(p)
            + f" {p['best']}'s overhead: {d[16]['overhead']:+.2f} at N = 16, {d[32]['overhead']:+.2f} at N = 32 (the M3 "
            f"Pro: {m3['overhead_at_N32']:+.3f} at N = 32, {paper_speedup()})"
            + ("" if any(f.startswith("amx") for f in flags) else
               "; without AMX tiles a bfloat16 or int8 call of more than a few rows is bound by the dot-product rate, "
               "not by reading the weights") + ". " + phase_split_sentence(real, phases)
            + " Where the call's time goes (" + phases["deployment"] + "): "
            + ", ".join(f"N = {n}: projections {r['projections_ms']:.1f} of {r['call_ms']:.1f} ms "
                        f"({r['projections_ms'] / r['call_ms']:.0%})"
                        + (f", {r['projections_ms'] / ar['projections_ms']:.1f}x the AR call's products"
                           if ar and int(n) != 0 else "")
                        for n, r in phases["by_n"].items()) + ".")
    return text


def deployments_of(grid: dict) -> dict[str, dict]:
    return {k: v for k, v in grid.items() if isinstance(v, dict) and "by_n" in v and "ar_ms" in v}


def projected(grid: dict, tokens_per_step: dict[int, float] | None = None) -> dict:
    """Per deployment: {"ar_ms", "by_n": {N: {"q", "call_ms", "overhead", "paper_speedup", "mini_speedup",
    "paper_vs_fastest_ar"}}, "best_n" (by paper_speedup, else mini_speedup), "best_speedup"} (speedups None where no
    numerator). paper_speedup is over the deployment's own AR call; paper_vs_fastest_ar: the paper's tokens/step x
    (the fastest AR call of the grid, `fastest_exact_ar`) / this call, the speedup over the fastest
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


def best_projected(proj: dict) -> str:
    """The deployment of `projected(...)` with the largest best speedup (a deployment with none counts as 0)."""
    return max(proj, key=lambda k: proj[k]["best_speedup"] or 0)


def figure4_rows(grid: dict, device: str, tokens_per_step: dict[int, float] | None = None) -> list[dict]:
    """Figure 4 as a table: the paper's devices (as reported), then each deployment on `device`: AR call ms, overhead
    at N = 16 and 32, projected speedup at N = 32 and at its best N of the paper's 16, 32, 64 (paper tokens/step), and its best against
    the fastest AR call of the grid; with `tokens_per_step` (the miniature's measured curve), also its best N
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
                     "best N (speedup)": f"{best} ({dev['speedup'][best]:.2f}x)",
                     "best N vs the grid's fastest AR call": "-",
                     **({"best N (miniature's tokens/step)": "-"} if tokens_per_step else {}),
                     "source": "paper (speedups: Figure 4's formula)"})
    for name, d in projected(grid, tokens_per_step).items():
        r = d["by_n"]
        rows.append({"device": f"{device}: {name}", "AR call ms": round(d["ar_ms"], 2),
                     "overhead N=16": _fmt(_at(r, 16, "overhead")), "overhead N=32": _fmt(_at(r, 32, "overhead")),
                     "speedup N=32": _fmt(_at(r, 32, "paper_speedup"), "x") + _inferred(32, _at(r, 32, "paper_speedup")),
                     "best N (speedup)": (f"{d['best_n']} ({d['best_speedup']:.2f}x)" + _inferred(d["best_n"], 1))
                     if d["best_n"] else "-",
                     "best N vs the grid's fastest AR call": _best(r, "paper_vs_fastest_ar") + _inferred(
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


def figure4_report_lines(m: dict) -> list[str]:
    """report.md's section from metrics' "figure4_cpu" (Figure 4 for this CPU beside the paper's devices); [] without
    it."""
    f4 = m.get("figure4_cpu")
    if not f4:
        return []
    best = f4["projected"][f4["best"]]
    return ["## Figure 4 for a CPU, at the 0.6B shape", "",
            measured_on(f4.get("environment"), f" (`make bench`, {f4['source']})") + ": p50 of the fused call "
            "(drafts, attention and heads included) at the exact shape of the 0.6B code predictor, random weights.",
            "", markdown(figure4_rows(f4["grid"], "this CPU, projected")), "",
            "Projected speedup: the paper's tokens/step (where the paper gives it: N = "
            + ", ".join(f"{n}{' (inferred)' if ceiling_provenance(n) == 'inferred' else ''}" for n in paper_points())
            + ") / (1 + overhead), since acceptance does not depend on the device (the paper's Sec. 3.4); "
            f"over each deployment's own AR call the best is {f4['best']} at N = {best['best_n']}, "
            f"{best['best_speedup']:.2f}x. " + projection_sentence(projection_at(f4["grid"], PAPER_N)), "",
            phase_split_sentence(f4["grid"], f4["phases"]) + " Where the call's time goes ("
            + f4["phases"]["deployment"] + ", p50 ms): "
            + "; ".join(f"N = {n}: call {r['call_ms']:.2f}, projections {r['projections_ms']:.2f}, attention and "
                        f"small ops {r['attention_and_small_ops_ms']:.2f}, heads and top-k {r['heads_ms']:.2f}"
                        for n, r in f4["phases"]["by_n"].items()) + ".", ""]
