"""Notebook 06's paragraphs, built from its numbers (the latency sweep `lat`, the deployment comparison `dep`, the
0.6B-shape bench file), so the notebook cell only calls and shows. Each timing is named once: the sweep's *AR call*
(`lat["ar"]["call_ms_p50"]`), the profile's *AR step* (`lat["profile"]["ar"]`), whole *frames*
(`lat["ar"]["frame_ms"]`); `speed_sentences` reconciles them.

Pure: dicts in, Markdown out, except `bench_file`, which looks for a file.
"""

from __future__ import annotations

from pathlib import Path

from helpers.report.latency_metrics import call_cost, verify_bound
from helpers.report.projection import PAPER_N, ceiling_text, projection_at, projection_sentence
from helpers.report.speed_sentences import best_n_sentence, measured_against_realised, three_estimates

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
    """The miniature per deployment: the lossless comparison (`cpu_figure4.frames_sentence`), then how much of a
    call the projections are at this shape."""
    shares = ", ".join(f"{r['projections_ms'] / r['call_ms']:.0%} of the {'AR' if int(n) == 0 else f'N = {n}'} call"
                       for n, r in dep["phases"]["by_n"].items())
    return (frames_sentence + f" At this shape (hidden {hidden_size}) the projections are {shares} "
            f"({dep['phases']['deployment']}, the phases above); the rest (attention, norms, RoPE, copies, each a "
            "small operation with its own fixed cost) does not depend on the kernel. The next cell shows the 0.6B "
            "shape.")


def figure4_md(real: dict, where: str, m3: dict) -> str:
    """The 0.6B shape in words: the projection at the paper's N against the fastest lossless AR call of the grid
    (`projection`), the overheads of that deployment beside the M3 Pro's, the call's phases in ms and in AR calls
    (compute-bound or not, from the numbers),."""
    p = projection_at(real, PAPER_N)
    d = {int(k): v for k, v in real[p["best"]]["by_n"].items()}
    flags = (real.get("environment") or {}).get("cpu_flags", [])
    phases = real["phases"]
    ar = phases["by_n"].get("0") or phases["by_n"].get(0)
    text = (f"{where}. " + projection_sentence(p)
            + f" {p['best']}'s overhead: {d[16]['overhead']:+.2f} at N = 16, {d[32]['overhead']:+.2f} at N = 32 (the M3 "
            f"Pro: {m3['overhead_at_N32']:+.3f} at N = 32, {m3['speedup_at_N32']:.2f}x measured)"
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
