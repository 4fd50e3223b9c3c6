"""The latency sweep in the words notebook 06 and report.md share, each sentence built from the numbers it
interprets so that it cannot contradict them.

Input: the sweep's rows per N, `helpers.measure.latency.latency_metrics`'s "by_n" ({N: {"call_ms_p50", "overhead",
"tokens_per_step", "realised_speedup", "measured_speedup", ...}}) or metrics.json's `latency.<device>` (the same rows
under str(N), COLUMNS kept).

    call_cost(overhead)                      # a verify call in AR calls
    measured_against_realised(by_n)          # where whole frames measured more, and where less, than the call predicts
    best_n_sentence(by_n, best_n)            # why the best N is where it is
    call_cost_sentence(at_n, n)              # the measured speedup at N: the call's cost, the paper's arithmetic
    sweep_timing_sentence(by_n, calls, warmup, ar_ms)   # how the sweep times, and any N cheaper than a smaller N
"""

from __future__ import annotations

from helpers.report.paper import paper_arithmetic


COLUMNS = ("call_ms_p50", "overhead", "tokens_per_step", "realised_speedup", "measured_speedup")   # per N, kept


def call_cost(overhead: float) -> float:
    """A call of N + 1 tokens in AR calls: 1 + overhead (overhead = call(N + 1) / call(1) - 1)."""
    return 1 + overhead


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


def call_cost_sentence(at_n: dict, n: int = 32) -> str:
    """The closing table's reason for the measured speedup at N: the call's cost in AR calls, what tokens/step over
    that cost predicts, and what whole frames measured (not assumed equal)."""
    cost = 1 + at_n["overhead"]
    return (f"a verify call of {n + 1} tokens costs {cost:.2f} AR calls here: tokens/step {at_n['tokens_per_step']:.2f}"
            f" / {cost:.2f} = {at_n['tokens_per_step'] / cost:.2f}x predicted, {at_n['measured_speedup']:.2f}x measured "
            f"over whole frames; {paper_arithmetic(n=n)}")


def dips(by_n: dict, ar_ms: float | None = None) -> dict[int, list[int]]:
    """{N: the smaller Ns (0: the AR call, `ar_ms`) whose sweep p50 is above N's}, for each N that has one: where the
    sweep's milliseconds do not rise with N."""
    ms = {int(n): r["call_ms_p50"] for n, r in by_n.items() if str(n).isdigit() and r.get("call_ms_p50") is not None}
    if ar_ms is not None:
        ms[0] = ar_ms
    found = {n: [k for k in sorted(ms) if k < n and ms[k] > ms[n]] for n in sorted(ms)}
    return {n: above for n, above in found.items() if above}


def sweep_timing_sentence(by_n: dict, calls: int, warmup: int, ar_ms: float | None = None) -> str:
    """How the sweep times its calls (each query length in its own block, the same call back to back), the Ns whose
    p50 is below a smaller N's (`dips`, read off the numbers), and that milliseconds compare within one table."""
    ms = {int(n): r["call_ms_p50"] for n, r in by_n.items() if str(n).isdigit() and r.get("call_ms_p50") is not None}
    if ar_ms is not None:
        ms[0] = ar_ms

    def name(k):
        return "the AR call's" if k == 0 else f"N = {k}'s"

    found = dips(by_n, ar_ms)
    text = (f"The sweep times each query length in its own block, one block after another: {warmup} warm-ups, then "
            f"{calls} calls of the same call back to back, and keeps their p50. A change of load between blocks "
            "moves one N's p50 against its neighbours, so these milliseconds need not rise with N")
    if found:
        text += ": here " + "; ".join(
            f"N = {n}'s p50 ({ms[n]:.3f} ms) is below " + ", ".join(name(k) for k in above)
            + f" ({', '.join(f'{ms[k]:.3f}' for k in above)} ms)" for n, above in found.items())
    else:
        text += " (here each N's p50 is at least every smaller N's)"
    return text + (". The deployment grid below times every N in every round, other calls in between: compare "
                   "milliseconds and overheads within one table, not across the two.")
