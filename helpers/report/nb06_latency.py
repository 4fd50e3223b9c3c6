"""Notebook 06 (latency): the latency sweep, the round's phases, the CPU deployments, the miniature at the real
size, Figure 4 for a CPU and the GPU reference, as tables, figures and sentences, each sentence built from the
numbers it interprets so that it cannot contradict them (06, report.md, the README).

- The sweep (`helpers.measure.latency.latency_metrics`, "lat"): {"device", "cuda_graph", "frames", "ar":
  {"call_ms_p50", "frame_ms", ...}, "official": {"frame_ms", "over_ar"} | None, "best_n", "by_n": {N: {"call_ms_p50",
  "overhead", "tokens_per_step", "realised_speedup", "measured_speedup", "measured_over_tps", ...}}, "profile":
  `profile.round_profile`'s dict}. Each timing is named once: the sweep's *AR call* (`lat["ar"]["call_ms_p50"]`), the
  profile's *AR step* (`lat["profile"]["ar"]`), whole *frames* (`lat["ar"]["frame_ms"]`); `three_estimates`
  reconciles them.
- The projection at the 0.6B shape, told one way everywhere: the paper's own tokens/step at a tree size N it gives
  (`helpers.report.paper`), over this CPU's measured call, against the fastest EXACT AR call of the same grid (`make
  bench`'s `cpu_0.6b.json`). No kernel lets a row depend on the call's other rows (w8a8 quantises each row on its own
  int8 grid, `helpers.method.kernels`), so the baseline is the fastest AR call of any deployment; whether whole
  speculative frames equal their AR frames is measured where frames are timed (`exact_frames`), never assumed.
- Figure 4 for a CPU: the paper profiles only the verify overhead per device, and acceptance does not depend on the
  device (its Sec. 3.4), so the projected speedup at N is tokens/step(N) / (1 + overhead(N)), with two numerators,
  each labelled: the paper's tokens/step where it reports one (no value interpolated), and the miniature's own.
- The miniature at the real code predictor's size (`metrics.json` "full_size", `measure.full_size_frames`) and the
  committed GPU reference (`make bench-gpu` -> outputs/gpu-reference/bench_gpu.json), each number labelled with the
  machine it was measured on.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from helpers.measure.deployments import DEPLOYMENTS, spread, spread_text
from helpers.measure.full_size_frames import spread_words
from helpers.measure.machine import measured_on
from helpers.measure.speedup import formula, frame_speedup
from helpers.report.paper import (PAPER, PAPER_DEVICE_NAMES, PAPER_N, ceiling_provenance, ceiling_text,
                                  paper_arithmetic, paper_figure4, paper_points, paper_speedup,
                                  paper_tokens_per_step)
from helpers.report.plots import mark, plt, powers_of_two, readable_ticks
from helpers.report.tables import markdown


COLUMNS = ("call_ms_p50", "overhead", "tokens_per_step", "realised_speedup", "measured_speedup")   # per N, kept


CHEAP_VERIFY = 1.2          # AR steps: a verify call costing less lets tokens/step turn into speedup


def latency_rows(by_n: dict) -> list[dict]:
    """Notebook 06's latency table: one row per N of lat["by_n"], {"N", *COLUMNS, "measured / tokens per step"}."""
    return [{"N": n, **{k: r[k] for k in COLUMNS}, "measured / tokens per step": r["measured_over_tps"]}
            for n, r in by_n.items()]


def latency_section(lat: dict, dtype: str, calls: int, warmup: int) -> dict:
    """metrics.json's `latency.<device>` for this run: {str(N): {COLUMNS}, "best_n", "ar_call_ms_p50", "ar_frame_ms",
    "official_frame_ms", "dtype", "cuda_graph", "calls", "warmup", "frames", "profile"}. dtype: the timed model's
    (str(predictor.dtype)); calls / warmup: timed and untimed calls per query length (P.latency_calls / _warmup)."""
    return {**{str(n): {k: r[k] for k in COLUMNS} for n, r in lat["by_n"].items()},
            "best_n": lat["best_n"], "ar_call_ms_p50": lat["ar"]["call_ms_p50"], "ar_frame_ms": lat["ar"]["frame_ms"],
            "official_frame_ms": lat["official"]["frame_ms"], "dtype": dtype, "cuda_graph": lat["cuda_graph"],
            "calls": calls, "warmup": warmup, "frames": lat["frames"], "profile": lat["profile"]}


def call_cost(overhead: float) -> float:
    """A call of N + 1 tokens in AR calls: 1 + overhead (overhead = call(N + 1) / call(1) - 1)."""
    return 1 + overhead


def verify_bound(round_row: dict, tokens_per_step: float, cheap_below: float = CHEAP_VERIFY) -> dict:
    """What the verify call alone leaves of tokens/step at one N.

    round_row: that N's row of the profile (`round_profile(...)["trees"][N]`), its "ratio_verify_only" = AR step /
    (AR step + the layers' excess over it); tokens_per_step: that N's.
    -> {"verify": the verify call over N + 1 tokens in AR steps (1 / ratio_verify_only), "cheap": verify <
       cheap_below (tokens/step can turn into speedup), "bound": tokens_per_step / verify, the most speedup with
       free drafts and free round work (sampling, walk, commit, query), None without tokens_per_step}."""
    verify = 1 / round_row["ratio_verify_only"]
    return {"verify": verify, "cheap": verify < cheap_below,
            "bound": formula(tokens_per_step, verify) if tokens_per_step is not None else None}


FLAT = 0.05        # speedups within this of the best are "about the same": no single N stands out


def _rows(by_n: dict) -> dict[int, dict]:
    return {int(n): r for n, r in by_n.items() if str(n).isdigit() and r.get("measured_speedup") is not None}


def measured_against_realised(by_n: dict) -> str:
    """Where whole frames measured more, and where less, than the call's growth predicts (tokens/step /
    (1 + overhead)), N by N: the direction is read off the numbers, not assumed."""
    rows = _rows(by_n)
    above = [n for n, r in sorted(rows.items()) if r["measured_speedup"] > r["realised_speedup"]]
    below = [n for n in sorted(rows) if n not in above]
    parts = []
    if above:
        parts.append(f"more than the call's growth predicts at N = {', '.join(map(str, above))}")
    if below:
        parts.append(f"less at N = {', '.join(map(str, below))}")
    return ("Whole frames measured " + "; ".join(parts) + ": the difference is the work outside the call (sampling, "
            "walk, commit, the once-per-frame prefill, pruned rounds near a frame's end), which the profile breaks "
            "down; its sign is read off the numbers, not assumed.")


def best_n_sentence(by_n: dict, best_n: int) -> str:
    """Why the best N is where it is, from the sweep: the Ns whose measured speedup is within FLAT of the best (a
    plateau, no reason to prefer one), and how far the paper's N = 32 falls below it."""
    rows = _rows(by_n)
    best = rows[int(best_n)]["measured_speedup"]
    near = [n for n, r in sorted(rows.items()) if best - r["measured_speedup"] <= FLAT]
    text = (f"The best N here is {best_n} ({best:.2f}x); " + (
        f"N = {', '.join(map(str, near))} all lie within {FLAT} of it, so the sweep does not single out one N"
        if len(near) > 1 else f"every other N is more than {FLAT} below it"))
    if 32 in rows and int(best_n) != 32:
        text += f"; at N = 32 it measures {rows[32]['measured_speedup']:.2f}x"
    return text + "."


def three_estimates(by_n_row: dict, round_row: dict, ar_step: dict, n: int, ar_call_ms: float) -> str:
    """One N's speedup three ways, each named once: the call's growth (the latency sweep's overhead), the profile's
    round in AR steps, and whole frames; the AR call of the sweep against the AR step of the profile (two harnesses:
    random inputs at t = 1 against recorded frames, with sampling and commit), reconciled in one sentence."""
    call_calls, round_steps = 1 + by_n_row["overhead"], 1 / round_row["ratio"]
    profile_says = by_n_row["tokens_per_step"] * round_row["ratio"]
    return (f"**Three estimates of the speedup at N = {n}**: the call's growth alone predicts "
            f"{by_n_row['realised_speedup']:.2f}x (a verify call of {call_calls:.2f} AR calls); the profile's round, "
            f"{round_steps:.2f} AR steps, predicts {profile_says:.2f}x; whole frames measured "
            f"{by_n_row['measured_speedup']:.2f}x. **Two harnesses, named apart**: the sweep's *AR call* "
            f"({ar_call_ms:.3f} ms) is the call alone on random inputs at t = 1; the profile's *AR step* "
            f"({ar_step['per_call_ms']:.3f} ms) is a step of a recorded frame: layers {ar_step['layers']:.3f}, "
            f"heads {ar_step['heads']:.3f}, sampling {ar_step['sample']:.3f}, commit {ar_step['commit']:.3f} ms. "
            f"The step costs {ar_step['per_call_ms'] / ar_call_ms:.2f} AR calls, which is why a round counted in AR "
            f"steps ({round_steps:.2f}) and its call counted in AR calls ({call_calls:.2f}) differ; whole frames "
            f"also hold the prefill ({ar_step['prefill_ms']:.2f} ms, once per frame in both loops) and pruned "
            "rounds near a frame's end, which the per-round profile leaves out.")


def call_cost_sentence(at_n: dict, n: int = 32) -> str:
    """The closing table's reason for the measured speedup at N: the call's cost in AR calls, what tokens/step over
    that cost predicts, and what whole frames measured (not assumed equal)."""
    cost = 1 + at_n["overhead"]
    return (f"a verify call of {n + 1} tokens costs {cost:.2f} AR calls here: tokens/step {at_n['tokens_per_step']:.2f}"
            f" / {cost:.2f} = {at_n['tokens_per_step'] / cost:.2f}x predicted, {at_n['measured_speedup']:.2f}x measured "
            f"over whole frames; {paper_arithmetic(n=n)}")


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


def sweep_md(lat: dict, m: dict, where: str, cuda_graph_param: str) -> str:
    """How the sweep and the frames were timed, with the AR call and AR frame named once."""
    return (f"{where}: {lat['device']}, {m['dtype']}. Per-call latency: p50 of {m['calls']} calls after "
            f"{m['warmup']} warm-ups per query length, "
            f"{'replayed from captured CUDA graphs' if m['cuda_graph'] else 'eager (no CUDA graphs)'} "
            f"(cuda_graph = {cuda_graph_param}); the *AR call* alone {lat['ar']['call_ms_p50']:.3f} ms. Whole "
            f"frames: the eager AR loop, the eager speculative decoder per N and the official generate, medians over "
            f"{m['frames']} recorded frames: our AR loop {lat['ar']['frame_ms']:.2f} ms a frame, the official generate "
            f"{lat['official']['frame_ms']:.2f} ms.")


def best_md(lat: dict, paper: dict) -> str:
    """The sweep in words: measured against what the call's growth predicts (by sign, N by N), the best N, N = 32,
    and how to read Figure 4 (the paper's ceiling at N = 32 labelled inferred)."""
    best, by_n = lat["best_n"], lat["by_n"]
    b = by_n[best]
    slower = [n for n, r in by_n.items() if r.get("measured_speedup") is not None and r["measured_speedup"] < 1]
    return (measured_against_realised(by_n) + " " + best_n_sentence(by_n, best)
            + (f" Below 1 (slower than the AR loop) at N = {', '.join(map(str, slower))}." if slower else "")
            + f" Figure 4, left: this run's tokens/step is the dashed blue line ({b['tokens_per_step']:.2f} at N = "
            f"{best}). The paper's ceiling is the grey marks (N = 32: {ceiling_text(32)}). Right: the call cost "
            f"1 + overhead against q = N + 1, this run's {call_cost(b['overhead']):.2f} at N = {best} beside the "
            "paper's devices.")


def profile_md(lat: dict, m3_ratio: float, where: str) -> str:
    """Where a round's time goes at the best N: AR step / round and its two bounds, the verify call in AR steps
    (compute-bound or not, from the number), then the three estimates of the speedup and the two harnesses."""
    best = lat["best_n"]
    r, rb = lat["profile"]["trees"][best], lat["by_n"][best]
    vb = verify_bound(r, rb["tokens_per_step"])
    text = (f"{where}. At N = {best}: AR step / round {r['ratio']:.2f} (measured speedup / tokens/step "
            f"{rb['measured_over_tps']:.2f}); if sampling, walk, commit and query cost no more than in an AR step "
            f"{r['ratio_free_host']:.2f}; verify only {r['ratio_verify_only']:.2f}. The paper's MacBook M3 Pro: "
            f"{m3_ratio:.2f} (its speedup over its ceiling, {ceiling_text(32)} at N = 32). On {lat['device']} the "
            f"verify call over {int(best) + 1} tokens alone costs **{vb['verify']:.2f} AR steps**: ")
    text += ("little more than one, so tokens/step can turn into speedup here." if vb["cheap"] else
             "the call grows with the query (its matrix products do N + 1 rows of arithmetic): even with free drafts "
             f"and free round work a round would cost that much, and tokens/step of {rb['tokens_per_step']:.2f} buy "
             f"at most {vb['bound']:.2f}x.")
    return text + "\n\n" + three_estimates(rb, r, lat["profile"]["ar"], best, lat["ar"]["call_ms_p50"])


def deployments_md(dep: dict, hidden_size: int, frames_sentence: str) -> str:
    """The miniature per deployment: the lossless comparison (`frames_sentence`), then how much of a
    call the projections are at this shape."""
    shares = ", ".join(f"{r['projections_ms'] / r['call_ms']:.0%} of the {'AR' if int(n) == 0 else f'N = {n}'} call"
                       for n, r in dep["phases"]["by_n"].items())
    return (frames_sentence + f" At this shape (hidden {hidden_size}) the projections are {shares} "
            f"({dep['phases']['deployment']}, the phases above); the rest (attention, norms, RoPE, copies, each a "
            "small operation with its own fixed cost) does not depend on the kernel. The sections below take the "
            "same deployments to the real code predictor's size, then to the 0.6B shape.")


def figure4_md(real: dict, where: str, m3: dict) -> str:
    """The 0.6B shape in words: the projection at the paper's N against the fastest AR call of the grid
    (`projection_at`), the overheads of that deployment beside the M3 Pro's, the call's phases in ms and in AR calls
    (compute-bound or not, from the numbers),."""
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
               "not by reading the weights") + ". Where the call's time goes (" + phases["deployment"] + "): "
            + ", ".join(f"N = {n}: projections {r['projections_ms']:.1f} of {r['call_ms']:.1f} ms "
                        f"({r['projections_ms'] / r['call_ms']:.0%})"
                        + (f", {r['projections_ms'] / ar['projections_ms']:.1f}x the AR call's products"
                           if ar and int(n) != 0 else "")
                        for n, r in phases["by_n"].items()) + ".")
    return text


def side_by_side_rows(both: dict) -> list[dict]:
    """06's compiled side-by-side table (`bench.compiled_comparison`'s first dict): one row per system with its
    ratios to the official `generate` and to the fastest AR loop."""
    return [{"system": k, **v, "official / it": both["ratios"][k].get("official"),
             "fastest AR / it": both["ratios"][k][both["fastest_ar"]]} for k, v in both["systems"].items()]


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
    passes = all("passes_ms" in r for r in frames["systems"].values())
    text = (f"Among the lossless deployments the fastest AR loop is **{e['fastest_ar']}** and the fastest speculative "
            f"loop **{e['fastest_spec']}**: {e['spec_over_ar']:.2f}x the fastest lossless AR loop"
            + (spread_text(spread(frames["systems"], e["fastest_ar"], e["fastest_spec"])) if passes else "") + ".")
    if e["inexact_spec"]:
        name, ratio = e["inexact_spec"]
        text += (f" Apart, a loop with a frame differing from its own AR frame: {name} at {ratio:.2f}x the fastest "
                 f"lossless AR loop ({e['fastest_ar']}).")
    return text + " " + identical_sentence(frames)


def identical_sentence(frames: dict) -> str:
    """How many speculative frames of each deployment equal its own AR frames (same uniforms), as a sentence."""
    return ("Speculative frames equal to the same deployment's AR frames (same uniforms): "
            + "; ".join(f"{name} " + ", ".join(f"N = {n}: {v} of {frames['frames']}" for n, v in same["spec"].items())
                        for name, same in frames["identical"].items()) + ".")


def figure4_report_lines(m: dict) -> list[str]:
    """report.md's sections from metrics: "figure4_cpu" (Figure 4 for this CPU beside the paper's devices) and
    "deployments" (the miniature's whole frames per deployment)."""
    out = []
    f4 = m.get("figure4_cpu")
    if f4:
        best = f4["projected"][f4["best"]]
        out += ["## Figure 4 for a CPU, at the 0.6B shape", "",
                measured_on(f4.get("environment"), f" (`make bench`, {f4['source']})") + ": p50 of the fused call "
                "(drafts, attention and heads included) at the exact shape of the 0.6B code predictor, random weights.",
                "", markdown(figure4_rows(f4["grid"], "this CPU, projected")), "",
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
    per = []
    for name in deployments(table):
        n, r = best_of(table, name)
        own = s[f"ar@{name}"]["frame_ms"] / r["frame_ms"]
        calls = table["calls"][name]
        verify = calls["by_n"].get(n, calls["by_n"].get(str(n)))["call_ms"] / calls["ar_ms"]
        per.append(f"{name} {own:.2f}x its own AR loop at N = {n} ({r['tokens_per_step']:.2f} tokens/step; its verify "
                   f"call, timed alone, {verify:.2f} of its AR calls)")
    text.append("Each deployment against its own AR loop, at its best N: " + "; ".join(per) + ". Speculation "
                "pays where a round costs little more than an AR step: where the call reads its weights once "
                "whatever its rows (a bandwidth-bound kernel); where each added row costs arithmetic, a round costs "
                "several AR steps and the saved calls do not pay.")
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


GPU_REFERENCE = Path(__file__).resolve().parents[2] / "outputs" / "gpu-reference" / "bench_gpu.json"   # committed


def load_gpu_reference(path: str | Path = GPU_REFERENCE) -> dict | None:
    """The GPU reference, or None where there is none."""
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else None


def gpu_label(data: dict) -> str:
    """"Measured on NVIDIA H200, one run of make bench-gpu"."""
    return f"Measured on {data['device']}, one run of make bench-gpu (torch {data['torch']})"


def gpu_frame_rows(data: dict, part: str = "mini") -> list[dict]:
    """One row per system of a part's side-by-side ("mini": the miniature; "full": at the real size), fastest first."""
    side = data[part]["side_by_side"]
    best = side["fastest_ar"]
    rows = []
    for name, r in sorted(side["systems"].items(), key=lambda kv: kv[1]["frame_ms"]):
        rows.append({"system": name, "ms per frame (p50)": round(r["frame_ms"], 2),
                     "x the fastest AR": round(side["ratios"][name][best], 2),
                     "tokens/step": round(r["tokens_per_step"], 2) if r["tokens_per_step"] else "-",
                     "host reads per frame": round(r["reads_per_frame"], 1) if r.get("reads_per_frame") is not None
                     else "-", "identical to AR": f"{r['identical']}/{side['frames']}" if r["identical"] is not None
                     else "-"})
    return rows


def gpu_round_rows(data: dict) -> list[dict]:
    """The captured round at t = 1: AR call, verify call and round (ms, and in AR calls) per shape, mode and N;
    the projected speedup with the paper's tokens/step where the reference projects one (the 0.6B shape)."""
    rows = []
    shapes = [("miniature, float32", data.get("mini", {}).get("round_parts", {}))]
    if "real" in data:
        shapes.append((f"0.6B shape, {data['real']['dtype']}", data["real"]["modes"]))
    for shape, modes in shapes:
        fastest = min((p["ar_call_ms"] for p in modes.values() if "skipped" not in p), default=None)
        for mode, prof in modes.items():
            if "skipped" in prof:
                continue
            ar = prof["ar_call_ms"]
            for n, r in prof["trees"].items():
                row = {"shape": shape, "mode": mode, "N": int(n), "AR call ms": round(ar, 3),
                       "verify ms": round(r["verify_ms"], 3), "round ms": round(r["round_ms"], 3),
                       "verify / AR call": round(r["verify_ms"] / ar, 2), "round / AR call": round(r["round_ms"] / ar, 2)}
                projection = prof.get("projection", {}).get(n)
                row["projected speedup (paper tokens/step), over its own AR call"] = (
                    f"{projection['frame']:.2f}x at {projection['tokens_per_step']}" if projection else "-")
                row["projected, over the fastest AR call of any mode"] = (
                    f"{against_fastest(projection, ar, r['round_ms'], fastest):.2f}x" if projection else "-")
                rows.append(row)
    return rows


def against_fastest(projection: dict, ar_ms: float, round_ms: float, fastest_ar_ms: float, codes: int = 15) -> float:
    """A mode's projected frame (its prefill, an AR call, plus 15 / tokens-per-step - 1 rounds) against a frame of 15
    calls of the fastest AR call of any mode: the ratio that does not flatter a mode with a slow AR call."""
    return fastest_ar_ms / ar_ms * frame_speedup(projection["tokens_per_step"], round_ms / ar_ms, codes)


def gpu_summary(data: dict) -> dict:
    """The headline numbers: the miniature's fastest speculative over fastest AR and its tokens/step, its verify and
    round in AR calls (inductor_graph, N = 32), the ceiling tokens/step / (verify / AR call); the 0.6B shape's
    round in AR calls and projected speedup at N = 32 (the fastest mode), and Figure 4's formula on the same calls
    (the paper's tokens/step over the verify call in AR calls: like with the paper's speedups)."""
    side = data["mini"]["side_by_side"]
    spec, ar = side["fastest_spec"], side["fastest_ar"]
    tps = side["systems"][spec]["tokens_per_step"]
    mini_parts = data["mini"]["round_parts"]
    mode = "inductor_graph" if "inductor_graph" in mini_parts else next(iter(mini_parts))
    n = max(mini_parts[mode]["trees"], key=int)
    mp = mini_parts[mode]["trees"][n]
    mini_verify = mp["verify_ms"] / mini_parts[mode]["ar_call_ms"]
    real = {m: p for m, p in data["real"]["modes"].items() if "skipped" not in p and "32" in map(str, p["trees"])}
    best = min(real, key=lambda m: real[m]["trees"][_key(real[m]["trees"], 32)]["round_ms"])
    r32 = real[best]["trees"][_key(real[best]["trees"], 32)]
    fastest_ar = min(real, key=lambda m: real[m]["ar_call_ms"])
    p32 = real[best]["projection"][_key(real[best]["projection"], 32)]
    return {"speedup": side["ratios"][spec][ar], "fastest_spec": spec, "fastest_ar": ar, "tokens_per_step": tps,
            "mini_mode": mode, "mini_n": int(n), "mini_verify_over_ar": mini_verify,
            "mini_round_over_ar": mp["round_ms"] / mini_parts[mode]["ar_call_ms"],
            "ceiling": formula(tps, mini_verify), "real_mode": best,
            "real_verify_over_ar": r32["verify_ms"] / real[best]["ar_call_ms"],
            "real_round_over_ar": r32["round_over_ar"],
            "real_projected": p32["frame"], "real_fastest_ar_mode": fastest_ar,
            "real_projected_vs_fastest": against_fastest(p32, real[best]["ar_call_ms"], r32["round_ms"],
                                                         real[fastest_ar]["ar_call_ms"]),
            "paper_tokens_per_step": p32["tokens_per_step"],
            "real_formula": formula(p32["tokens_per_step"], r32["verify_ms"] / real[best]["ar_call_ms"])}


def _key(d: dict, n: int):
    return n if n in d else str(n)


def gpu_sentence(data: dict) -> str:
    """Where the method pays and what holds it down, from the reference's own numbers."""
    s = gpu_summary(data)
    verdict = "faster than" if s["speedup"] > 1.0 else "no faster than"
    return (f"{gpu_label(data)}: at batch 1 a GPU call is launch-bound, so the verify call over N + 1 = 33 tokens "
            f"costs only {s['real_verify_over_ar']:.2f} AR calls at the 0.6B shape ({s['real_mode']}), and a whole "
            f"round, with its sampling, walk, commit and drafts, {s['real_round_over_ar']:.2f}: with the paper's "
            f"{s['paper_tokens_per_step']:.2f} tokens/step at N = 32 (inferred: Table 2's value, which Figure 4 does "
            f"not print) Figure 4's formula on these calls gives {s['paper_tokens_per_step']:.2f} / "
            f"{s['real_verify_over_ar']:.2f} = {s['real_formula']:.2f}x (a formula, like the paper's "
            f"{paper_speedup()}); a whole frame of one AR call for the prefill and 15 / "
            f"{s['paper_tokens_per_step']:.2f} - 1 rounds of {s['real_round_over_ar']:.2f} AR calls projects "
            f"{s['real_projected']:.2f}x over its own AR frame, "
            f"{s['real_projected_vs_fastest']:.2f}x over the fastest AR call of any mode ({s['real_fastest_ar_mode']}). On "
            f"the miniature the fastest speculative loop ({s['fastest_spec']}) is {s['speedup']:.2f}x the fastest AR "
            f"loop ({s['fastest_ar']}), {verdict} it: its {s['tokens_per_step']:.2f} tokens/step meet a verify call of "
            f"{s['mini_verify_over_ar']:.2f} AR calls and a round of {s['mini_round_over_ar']:.2f} "
            f"({s['mini_mode']}, N = {s['mini_n']}), so even a round that cost its verify call alone would give at "
            f"most {s['ceiling']:.2f}x.")


def deployment_calls_md(dep: dict, where: str, calls_table: str, phases_table: str) -> str:
    """The call per deployment (its table, with the deployments this CPU cannot run and why), then where a call's
    time goes (its table), as notebook 06 shows them
    (`helpers.experiment.bench.deployment_bench.deployment_comparison`)."""
    left_out = "".join(f" {name}: not timed on this CPU ({why})." for name, why in dep["left_out"].items())
    return (f"{where}: the call per deployment, p50 ms (overhead).{left_out}\n\n{calls_table}\n\n"
            f"Where a call's time goes ({dep['phases']['deployment']}, p50 ms; N = 0: the AR call)\n\n{phases_table}")


def full_size_skipped(backend: str, device: str, frames: int) -> str:
    """Why notebook 06 skips the full-size frames."""
    return (f"full-size frames skipped (backend {backend}, device {device}, full_size_frames {frames}): they time "
            "the miniature's CPU deployments at the real shape")


def full_size_caption(where: str) -> str:
    """The caption of `full_size_figure`."""
    return (f"{where}. Milliseconds per frame at the real code predictor's shape, per deployment: the AR loop and the "
            "speculative loop per N; the dashed line is the fastest AR loop of any deployment.")
