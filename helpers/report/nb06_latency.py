"""Notebook 06 (latency): the latency sweep and where a round's time goes, and the compiled loops side by side, as
tables and sentences, each sentence built from the numbers it interprets so that it cannot contradict them.

- The sweep (`helpers.measure.latency.latency_metrics`, "lat"): {"device", "cuda_graph", "frames", "ar":
  {"call_ms_p50", "frame_ms", ...}, "official": {"frame_ms", "over_ar"} | None, "best_n", "by_n": {N: {"call_ms_p50",
  "overhead", "tokens_per_step", "realised_speedup", "measured_speedup", "measured_over_tps", ...}}, "profile":
  `profile.round_profile`'s dict}. Each timing is named once: the sweep's *AR call* (`lat["ar"]["call_ms_p50"]`), the
  profile's *AR step* (`lat["profile"]["ar"]`), whole *frames* (`lat["ar"]["frame_ms"]`); `three_estimates`
  reconciles them. The sentences report.md repeats: `helpers.report.latency_sweep`.

The notebook's other sections, each in its own module: the deployments (`helpers.report.deployments`), the
miniature at the real size (`helpers.report.full_size`, and the engines beside it, `nb06_engines`), Figure 4 for a
CPU at the 0.6B shape (`helpers.report.projection`) and the GPU reference (`helpers.report.gpu_reference`).
"""

from __future__ import annotations

from helpers.measure.speedup import formula
from helpers.report.latency_sweep import (COLUMNS, best_n_sentence, call_cost, measured_against_realised,
                                        sweep_timing_sentence)
from helpers.report.paper import ceiling_text


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


def verify_bound(round_row: dict, tokens_per_step: float, cheap_below: float = CHEAP_VERIFY) -> dict:
    """What the verify call's larger layers alone leave of tokens/step at one N.

    round_row: that N's row of the profile (`round_profile(...)["trees"][N]`), its "ratio_verify_only" = AR step /
    (AR step + the round's layers' excess over the step's); tokens_per_step: that N's.
    -> {"verify": an AR step plus that excess, in AR steps (1 / ratio_verify_only), "cheap": verify < cheap_below
       (tokens/step can turn into speedup), "bound": tokens_per_step / verify, the most speedup with free drafts and
       free round work (sampling, walk, commit, drafts), None without tokens_per_step}."""
    verify = 1 / round_row["ratio_verify_only"]
    return {"verify": verify, "cheap": verify < cheap_below,
            "bound": formula(tokens_per_step, verify) if tokens_per_step is not None else None}


ROUND_WORK = ("draft", "sample", "walk", "commit")        # what a round does besides its call (profile phases)


def round_work(round_row: dict) -> dict[str, float]:
    """{phase: ms} of a profiled round's work besides its call (ROUND_WORK; "draft" was "query" in older records)."""
    return {p: round_row[p] if p in round_row else round_row["query"] for p in ROUND_WORK}


def three_estimates(by_n_row: dict, round_row: dict, ar_step: dict, n: int, ar_call_ms: float) -> str:
    """One N's speedup three ways, each named once: the call's growth (the latency sweep's overhead), the profile's
    round in AR steps, and whole frames; then why the round's count in AR steps and its call's count in AR calls
    differ, from the round's own phases (its other work, its call inside a frame against alone)."""
    call_calls, round_steps = 1 + by_n_row["overhead"], 1 / round_row["ratio"]
    profile_says = by_n_row["tokens_per_step"] * round_row["ratio"]
    work = round_work(round_row)
    inside = round_row["layers"] + round_row["heads"]
    alone = by_n_row.get("call_ms_p50") or call_calls * ar_call_ms
    return (f"**Three estimates of the speedup at N = {n}**: the call's growth alone predicts "
            f"{by_n_row['realised_speedup']:.2f}x (a verify call of {call_calls:.2f} AR calls); the profile's round, "
            f"{round_steps:.2f} AR steps, predicts {profile_says:.2f}x; whole frames measured "
            f"{by_n_row['measured_speedup']:.2f}x. **Two harnesses, named apart**: the sweep's *AR call* "
            f"({ar_call_ms:.3f} ms) is the call alone on random inputs at t = 1; the profile's *AR step* "
            f"({ar_step['per_call_ms']:.3f} ms) is a step of a recorded frame: layers {ar_step['layers']:.3f}, "
            f"heads {ar_step['heads']:.3f}, sampling {ar_step['sample']:.3f}, commit {ar_step['commit']:.3f} ms. "
            f"The round costs {round_steps:.2f} AR steps while its call alone costs {call_calls:.2f} AR calls: "
            f"besides its call the round drafts, samples, walks and commits ({sum(work.values()):.2f} ms: "
            + ", ".join(f"{p} {ms:.3f}" for p, ms in work.items())
            + f"), and its call, timed inside a recorded frame (layers and heads {inside:.3f} ms), takes "
            f"{'more than' if inside > alone else 'no more than'} alone in the sweep ({alone:.3f} ms). Whole frames "
            f"also hold the prefill ({ar_step['prefill_ms']:.2f} ms, once per frame in both loops) and pruned "
            "rounds near a frame's end, which the per-round profile leaves out.")


def sweep_md(lat: dict, m: dict, where: str, cuda_graph_param: str) -> str:
    """How the sweep and the frames were timed, with the AR call and AR frame named once, and how the sweep's
    blocks of calls bear on its milliseconds (`sweep_timing_sentence`)."""
    return (f"{where}: {lat['device']}, {m['dtype']}. Per-call latency: p50 of {m['calls']} calls after "
            f"{m['warmup']} warm-ups per query length, "
            f"{'replayed from captured CUDA graphs' if m['cuda_graph'] else 'eager (no CUDA graphs)'} "
            f"(cuda_graph = {cuda_graph_param}); the *AR call* alone {lat['ar']['call_ms_p50']:.3f} ms. Whole "
            f"frames: the eager AR loop, the eager speculative decoder per N and the official generate, medians over "
            f"{m['frames']} recorded frames: our AR loop {lat['ar']['frame_ms']:.2f} ms a frame, the official generate "
            f"{lat['official']['frame_ms']:.2f} ms. "
            + sweep_timing_sentence(lat["by_n"], m["calls"], m["warmup"], lat["ar"]["call_ms_p50"]))


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
    """Where a round's time goes at the best N: AR step / round and its two bounds, an AR step plus only the round's
    larger layers in AR steps (compute-bound or not, from the number) beside the verify call inside the round, then
    the three estimates of the speedup and the two harnesses."""
    best = lat["best_n"]
    r, rb = lat["profile"]["trees"][best], lat["by_n"][best]
    ar = lat["profile"]["ar"]
    vb = verify_bound(r, rb["tokens_per_step"])
    inside = "" if "layers" not in r or "heads" not in r else (
        f" (the verify call itself, layers and heads timed inside the round, costs "
        f"{(r['layers'] + r['heads']) / ar['per_call_ms']:.2f} AR steps)")
    text = (f"{where}. At N = {best}: AR step / round {r['ratio']:.2f} (measured speedup / tokens/step "
            f"{rb['measured_over_tps']:.2f}); if sampling, walk, commit and drafts cost no more than in an AR step "
            f"{r['ratio_free_host']:.2f}; verify only {r['ratio_verify_only']:.2f}. The paper's MacBook M3 Pro: "
            f"{m3_ratio:.2f} (its speedup over its ceiling, {ceiling_text(32)} at N = 32). On {lat['device']} a "
            f"round that added to an AR step only its larger layers (the decoder stack over {int(best) + 1} tokens "
            f"instead of one) would cost **{vb['verify']:.2f} AR steps**{inside}: ")
    text += ("little more than one, so tokens/step can turn into speedup here." if vb["cheap"] else
             "the call grows with the query (its matrix products do N + 1 rows of arithmetic): even with free drafts "
             f"and free round work a round would cost that much, and tokens/step of {rb['tokens_per_step']:.2f} buy "
             f"at most {vb['bound']:.2f}x.")
    return text + "\n\n" + three_estimates(rb, r, ar, best, lat["ar"]["call_ms_p50"])


def side_by_side_rows(both: dict) -> list[dict]:
    """06's compiled side-by-side table (`bench.compiled_comparison`'s first dict): one row per system with its
    ratios to the official `generate` and to the fastest AR loop."""
    return [{"system": k, **v, "official / it": both["ratios"][k].get("official"),
             "fastest AR / it": both["ratios"][k][both["fastest_ar"]]} for k, v in both["systems"].items()]


def compiled_skipped(compile_mode: str, cuda_graph: str, device: str, real: dict | None = None,
                     gpu: dict | None = None) -> str:
    """Why notebook 06 times no compiled calls in this run, where the committed compiled numbers are (the GPU
    reference `gpu`, the "+inductor" rows of the 0.6B-shape grid `real`; None: not here) and how to time them."""
    rows = sorted(k for k, v in (real or {}).items() if "+inductor" in k and isinstance(v, dict))
    where = ([f"the GPU reference's, in the next section (the miniature's loops captured as CUDA graphs and compiled "
              f"by inductor, measured on {gpu['device']})"] if gpu else []) + (
        ["the " + " and ".join(f'"{k}"' for k in rows) + " rows of the 0.6B-shape table above (calls compiled by "
         "inductor, on the CPU that table names)"] if rows else [])
    graphs = "off on a CPU" if device == "cpu" else f"off on {device}"
    return (f"Compiled calls not timed in this run: compile = {compile_mode}, and CUDA graphs are {graphs} "
            f"(cuda_graph = {cuda_graph}). "
            + (f"The committed compiled numbers are {'; and '.join(where)}. " if where else
               "No compiled numbers are committed beside this run. ")
            + "To time them here, run notebook 06 with `-p compile inductor`, or run `make bench` (its output is not "
            "committed).")
