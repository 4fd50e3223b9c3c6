"""Notebook 06's latency figures from the latency sweep (`helpers.measure.latency.latency_metrics`, "lat"): its
table, the metrics.json section `latency.<device>`, the cost of a call in AR calls, and what the verify call alone
leaves of tokens/step.

`lat` as `latency_metrics` returns it: {"device", "cuda_graph", "frames", "ar": {"call_ms_p50", "frame_ms", ...},
"official": {"frame_ms", "over_ar"} | None, "best_n", "by_n": {N: {"call_ms_p50", "overhead", "tokens_per_step",
"realised_speedup", "measured_speedup", "measured_over_tps", ...}}, "profile": `profile.round_profile`'s dict}.
Everything here is pure: plain dicts and numbers in, the same out.
"""

from __future__ import annotations

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
            "bound": tokens_per_step / verify if tokens_per_step is not None else None}
