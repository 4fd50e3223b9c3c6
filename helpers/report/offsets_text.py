"""Notebook 02's checks and sentences on the offsets: the logit-bias identity, the share of the reused-to-Medusa
gap the offsets close per depth, and whether the positional mismatch is a translation.

    bias_max = offsets_logit_bias(offsets_drafter, predictor, h1)   # raises unless H(h + b_j) = W h + W b_j
    gap_share_sentence(trained.validation)                          # per depth: reused, offsets, Medusa top-1
    translation_sentence(diag.translation)                          # shares one shared vector explains
"""

from __future__ import annotations

import torch

from helpers.method.diagnostics import share_closed
from helpers.method.drafters import ReusedHeads

ULPS = 64                          # the identity holds to rounding of the master dtype, this many units in the last place


def offsets_logit_bias(drafter, predictor, h1: torch.Tensor) -> list[float]:
    """Check H_{1+j}(h_1 + b_j) = W_{1+j} h_1 + W_{1+j} b_j on the states h1 [B, H] (start position 1) of an offsets
    drafter (offsets after the final norm) over `predictor`'s reused heads; raises AssertionError unless the drafter's
    logits equal the reused heads' plus the bias within ULPS of its master dtype. -> max |W_{1+j} b_j| per depth j."""
    h1 = h1.to(drafter.master_dtype)
    with torch.no_grad():
        bias = torch.stack([drafter.head_weight(1, j).to(drafter.master_dtype) @ drafter.b[j - 1]
                            for j in range(1, drafter.depth + 1)])                                   # [K, V]
        reused = ReusedHeads(predictor, drafter.depth).draft_logits(h1, 1)                          # [B, K, V]
        tol = ULPS * torch.finfo(drafter.master_dtype).eps
        scale = float(reused.abs().max() + bias.abs().max())
        if not torch.allclose(drafter.draft_logits(h1, 1), reused + bias, rtol=tol, atol=tol * scale):
            raise AssertionError("the offsets drafter's logits are not the reused heads' plus W b_j")
    return bias.abs().amax(dim=-1).tolist()


def gap_share_sentence(validation: dict[str, list[list[float]]]) -> str | None:
    """Per depth, the validation top-1 of the reused heads, the offsets and Medusa heads, and the share of the
    reused-to-Medusa gap the offsets close (validation: name -> [depth][rank] accuracy). None without all three."""
    if not {"reused", "medusa", "offsets"} <= set(validation):
        return None
    r, o, m = (validation[k] for k in ("reused", "offsets", "medusa"))
    return "Validation top-1 of this run, " + "; ".join(
        f"depth {j + 1}: reused {r[j][0]:.3f}, offsets {o[j][0]:.3f}, Medusa {m[j][0]:.3f} "
        f"({share_closed(r[j][0], o[j][0], m[j][0]):.0%} of the gap)" for j in range(len(o))) + "."


def translation_sentence(translation: dict) -> str:
    """Whether the mismatch is a translation (translation: {"normed", "prenorm"} of `Translation` results with
    `shared_share` and `systematic_share` [K]): the shares one shared vector per depth explains."""
    def shares(values):
        return ", ".join(f"j={j + 1} {s:.1%}" for j, s in enumerate(values.tolist()))
    return ("Is the mismatch a translation? Share of the mean squared displacement `E|h_{t+j} - h_t|^2` that one "
            "shared vector per depth explains, after the final norm: " + shares(translation["normed"].shared_share)
            + "; before it: " + shares(translation["prenorm"].shared_share)
            + ". Of the part common to all frames (each start's mean displacement), one vector explains, after the "
            "norm: " + shares(translation["normed"].systematic_share)
            + ". What one vector does not explain differs from frame to frame or from start to start: no offset "
            "shared by every frame and start can follow it.")
