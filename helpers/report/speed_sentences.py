"""The sentences that interpret notebook 06's latency numbers, each built from the numbers it interprets so that it
cannot contradict them (06, report.md's closing table, the README): what the call's growth predicts against what
whole frames measure, why the best N is where it is, the three estimates of one N's speedup, and the paper's own
arithmetic.

Inputs are metrics.json's shapes: `by_n` {N: {"overhead", "tokens_per_step", "realised_speedup",
"measured_speedup"}} (keys int or str), a profile row (`profile.round_profile(...)["trees"][N]`) and its AR step.
Pure: numbers in, text out.
"""

from __future__ import annotations

from helpers.report.paper import PAPER
from helpers.report.projection import ceiling_provenance

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


def paper_arithmetic(device_key: str = "macbook_m3_pro", n: int = 32) -> str:
    """The paper's own numbers at N: its tokens/step over its call cost against the speedup it reports; the gap is
    what a round costs beyond its call (the paper's per-round host overhead)."""
    d = PAPER["figure4_latency"]["devices"][device_key]
    tps = float(PAPER["figure4_latency"]["acceptance_ceiling"][n])
    cost, reported = 1 + d[f"overhead_at_N{n}"], d[f"speedup_at_N{n}"]
    label = " (inferred)" if ceiling_provenance(n) == "inferred" else ""
    return (f"on the M3 Pro, tokens/step {tps:.2f}{label} / {cost:.3f} = {tps / cost:.2f}x against the "
            f"{reported:.2f}x it reports: a round costs a little more than its call there too")


def call_cost_sentence(at_n: dict, n: int = 32) -> str:
    """The closing table's reason for the measured speedup at N: the call's cost in AR calls, what tokens/step over
    that cost predicts, and what whole frames measured (not assumed equal)."""
    cost = 1 + at_n["overhead"]
    return (f"a verify call of {n + 1} tokens costs {cost:.2f} AR calls here: tokens/step {at_n['tokens_per_step']:.2f}"
            f" / {cost:.2f} = {at_n['tokens_per_step'] / cost:.2f}x predicted, {at_n['measured_speedup']:.2f}x measured "
            f"over whole frames; {paper_arithmetic(n=n)}")
