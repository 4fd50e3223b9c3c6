"""Which quantity limits tokens/step (notebook 03, "Which quantity limits tokens/step"): the target's own spread or the
positional mismatch, decided from the diagnostics' mean acceptance per depth on teacher-forced validation frames.

The rule: the own head (H_{t+j} on its own h_{t+j}: no mismatch) accepts a rank-0 draft with the target's top
probability, so 1 - max(own) is what the target's spread costs even without mismatch; the mismatch is the own head's
acceptance minus the best trained drafter's, per depth. The spread limits when the largest mismatch is below half of
1 - max(own), the mismatch otherwise.
"""

from __future__ import annotations

REFERENCES = ("own", "ideal", "own_ideal_frames")    # no trained drafter: never the "best" one
SPREAD_SHARE = 0.5          # the mismatch limits once it reaches this share of what the spread leaves (1 - max(own))


def best_trained(acc: dict[str, list[float]]) -> str:
    """The trained drafter with the largest acceptance summed over depths (`acc` as in `limiting_quantity`; ties:
    the first in `acc`'s order). Raises ValueError where `acc` holds no trained drafter."""
    return max((k for k in acc if k not in REFERENCES), key=lambda k: sum(acc[k]))


def limiting_quantity(acc: dict[str, list[float]]) -> dict:
    """What holds tokens/step down most.

    acc: {name: [D] mean acceptance E[p_target(rank-0 draft)] per depth 1..D} (`DraftScores.by_depth()[0]`), with
    "own" (the no-mismatch own head) and at least one trained drafter; "ideal" / "own_ideal_frames" may be there
    and are ignored.
    -> {"best": `best_trained(acc)`, "mismatch": [D] own - best per depth, "limit": "spread" | "mismatch",
        "why": the limit in words, e.g. "the targets' own spread (the no-mismatch own head accepts only 0.41-0.62)"
        or "the positional mismatch (the own head accepts up to 0.20 more than offsets)"}."""
    own = acc["own"]
    best = best_trained(acc)
    mismatch = [o - b for o, b in zip(own, acc[best])]
    if max(mismatch) < SPREAD_SHARE * (1 - max(own)):
        limit = "spread"
        why = f"the targets' own spread (the no-mismatch own head accepts only {min(own):.2f}-{max(own):.2f})"
    else:
        limit = "mismatch"
        why = f"the positional mismatch (the own head accepts up to {max(mismatch):.2f} more than {best})"
    return {"best": best, "mismatch": mismatch, "limit": limit, "why": why}
