"""The speedup arithmetic, written once (every caller imports it from here):

    formula(tokens_per_step, call_over_ar)          Figure 4's formula: tokens/step / (verify call / AR call), the
                                                    paper's "(Toks/step) / (1 + verify overhead)"; a formula, not a
                                                    timed frame
    frame_speedup(tokens_per_step, round_over_ar)   a frame of 15 AR calls against a speculative frame of one prefill
                                                    (an AR call) and 15 / tokens_per_step - 1 rounds, each round
                                                    costing round_over_ar AR calls: a projection from a timed round

Whole frames, timed side by side, are the measurement; these two say what a call or a round would give.
"""

from __future__ import annotations


def formula(tokens_per_step: float, call_over_ar: float) -> float:
    """Figure 4's formula: tokens/step over the verify call's cost in AR calls (1 + its overhead)."""
    return tokens_per_step / call_over_ar


def frame_speedup(tokens_per_step: float, round_over_ar: float, codes: int = 15, prefill_over_ar: float = 1.0) -> float:
    """15 AR calls against the prefill plus (codes / tokens_per_step - 1) rounds of round_over_ar AR calls each."""
    return codes / (prefill_over_ar + (codes / tokens_per_step - 1) * round_over_ar)
