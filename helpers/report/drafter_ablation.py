"""Table 2 (the drafter ablation) row by row beside the paper's, and the main drafter chosen among the offset
variants, in one sentence (notebooks 03 and 04, report.md)."""

from __future__ import annotations

from helpers.report.paper import PAPER, PAPER_DRAFTERS


def table2_row(kind: str, added_params, tokens_per_step, expected, tree_size) -> dict:
    """One row of Table 2 (drafter ablation): this run's numbers beside the paper's, which only its drafters have."""
    p = PAPER["table2_drafters"][PAPER_DRAFTERS[kind]] if kind in PAPER_DRAFTERS else None
    return {"drafter": kind, "added params": added_params, f"tokens/step (N={tree_size})": tokens_per_step,
            "expected": expected, "paper tokens/step": p and p["tokens_per_step"],
            "paper added params": p and int(float(p["added_params"]))}


def main_drafter_line(choice: dict) -> str:
    """The main drafter and why (metrics' `main_drafter`: `stages.main_drafter_choice`), in one sentence."""
    return (f"Main drafter (Table 3, losslessness, WER), chosen among the offset variants, the paper's method (the "
            f"other drafters are its baselines): **{choice['name']}**: {choice['why']}.")
