"""Notebook 02 (train drafters): how each drafter's training ended, the checks and sentences on the offsets (the
logit-bias identity, the share of the reused-to-Medusa gap they close per depth, whether the positional mismatch is
a translation) and the controlled drift (`helpers.experiment.stages.drift`) in words.

    bias_max = offsets_logit_bias(offsets_drafter, predictor, h1)   # raises unless H(h + b_j) = W h + W b_j
    gap_share_sentence(trained.validation)                          # per depth: reused, offsets, Medusa top-1
    translation_sentence(diag.translation)                          # shares one shared vector explains
    drift_md(drift_recovery())                                      # the tiny drifting talker, said
"""

from __future__ import annotations

import torch

from helpers.method.diagnostics import share_closed
from helpers.method.drafters import ReusedHeads


def training_sentence(training: dict[str, dict], max_epochs: int, lrs: list[float]) -> str:
    """How each drafter's training ended, from its record (`stages.drafters(...).training`: lr, best_epoch,
    val_loss per epoch with the untrained loss first): stopped early or ran to the epoch cap (the held-out loss
    still falling there or not), and whether the sweep picked its largest or smallest learning rate."""
    parts = []
    for kind, t in training.items():
        runs, loss = len(t["val_loss"]) - 1, t["val_loss"]
        if runs < max_epochs:
            text = f"{kind} stopped early after {runs} of at most {max_epochs} epochs (kept epoch {t['best_epoch']})"
        else:
            falling = loss[-1] < loss[-2]
            text = (f"{kind} ran to the cap of {max_epochs} epochs with the held-out loss "
                    + ("still falling (by {:.3f} in the last epoch): not trained to convergence by this recipe's "
                       "measure".format(loss[-2] - loss[-1]) if falling else "no longer falling"))
        if len(lrs) > 1 and float(t["lr"]) in (max(lrs), min(lrs)):
            edge = "largest" if float(t["lr"]) == max(lrs) else "smallest"
            text += f", at the {edge} learning rate of the sweep ({t['lr']:g}; one beyond it was not tried)"
        else:
            text += f", at learning rate {t['lr']:g}"
        parts.append(text)
    return ("How training ended: " + "; ".join(parts) + ".") if parts else ""


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


def drift_md(drift) -> str:
    """The controlled drift in words (`helpers.experiment.stages.drift.drift_recovery`'s result): held-out draft
    cross-entropy of every drafter, the share of the gap each offset variant closes, and whether the drift is a
    translation before and after the final norm."""
    dt, loss = drift.diagnostics.translation, drift.loss
    closed = {k: drift.loss_gap_closed(k) for k in ("offsets", "offsets_prenorm")}

    def per_depth(kind):
        return ", ".join(f"{c:.0%}" for c in drift.diagnostics.gap_closed(kind))
    return (f"Tiny talker, `position_ramp` = {drift.spec.position_ramp}, {drift.frames[0]} training and "
            f"{drift.frames[1]} held-out frames. Held-out draft cross-entropy (summed over depths, nats per frame): "
            f"reused heads {loss['reused']:.2f}, offsets after the norm {loss['offsets']:.2f}, offsets before it "
            f"{loss['offsets_prenorm']:.2f}, own heads {loss['own']:.2f}. Share of the gap closed: after the norm "
            f"**{closed['offsets']:.0%}**, before it **{closed['offsets_prenorm']:.0%}** (acceptance, per depth: "
            f"after {per_depth('offsets')}; before {per_depth('offsets_prenorm')}). Before the final norm the drift "
            f"is a translation (one shared vector explains {float(dt['prenorm'].shared_share.min()):.0%} or more of "
            f"the displacement at every depth); after it, {float(dt['normed'].shared_share.max()):.0%} at most: the "
            "norm rescales every state by its own length, so what the heads read is no longer one shift. An offset "
            f"where the drift is a shift {'recovers it' if closed['offsets_prenorm'] > 0.8 else 'recovers only part of it'}"
            f"; a logit bias after the norm "
            f"{'recovers most of it' if closed['offsets'] > 0.5 else 'recovers only part of it'}.")
