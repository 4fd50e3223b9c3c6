"""Which drafter is the run's main one (Table 3, the lossless check, quality): the better offset placement.

The paper adds its offsets after the final norm; this project also trains them before it (the ablation). When both
are trained, the calibration set decides: the one with the higher expected tokens/step at the run's tree size.
"""

from __future__ import annotations

from helpers.method.drafters import OFFSET_KINDS


def choose_main_drafter(kinds: list[str], expected: dict[str, float], tree_size: int) -> dict:
    """{"name", "why"[, "expected_tokens_per_step"]}: of the offset variants in `kinds` (after / before the final
    norm), the one with the higher expected tokens/step at N = tree_size on the calibration set (`expected`, needed
    when both are trained; a tie keeps the paper's, after the norm); the only one trained; else the last listed."""
    trained = [k for k in OFFSET_KINDS if k in kinds]
    if not trained:
        return {"name": kinds[-1], "why": "no offset variant trained: the last drafter listed"}
    if len(trained) == 1:
        return {"name": trained[0], "why": "the only offset variant trained"}
    if set(expected) != set(trained):
        raise ValueError(f"choosing between {trained} needs the expected tokens/step of each, got {sorted(expected)}")
    name = max(trained, key=lambda k: (expected[k], -trained.index(k)))
    scores = ", ".join(f"{k} {expected[k]:.3f}" for k in trained)
    return {"name": name, "why": f"higher expected tokens/step at N={tree_size} on the calibration set ({scores})",
            "expected_tokens_per_step": {k: expected[k] for k in trained}}
