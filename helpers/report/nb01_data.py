"""Notebook 01 (data and teacher forcing): the codec's levels, the miniature's build and training, in tables, a figure
and sentences.

- Per-level statistics of a 16-level codec's codes: how much of each level is predictable, and from what. For every
  level k (codebook of V_k codes; V, not K, which names the draft depth), fitted on training utterances and scored on
  held-out ones, in bits: `usage` (the plug-in entropy of c_k on the training frames over log2 V_k; 1: every code
  equally often); `H` (the held-out cross-entropy of the smoothed unigram, an estimate of H(c_k)); `H_given_lower`
  (of c_k given the level below in the same frame, H(c_k | c_{k-1})); `H_given_previous_frame` (of c_k given the same
  level in the previous frame). What the code predictor reaches given all of c_<k and the talker's state is its own
  held-out cross-entropy (shown beside these). Smoothing: counts plus a Dirichlet prior of strength V_k centred on
  the unigram, so a context seen rarely falls back to the unigram; a smoothed CE is an upper bound of the entropy it
  estimates.
- The round trip's PER with the first k levels (`round_trip_rows`, `round_trip_sentence`).
- The miniature's training curves and the held-out curves in words (`trend_words`: every turn larger than
  `tolerance` of the curve's range is named, so a sentence cannot say a curve fell when it first rose).
- Where a build duration was measured (`built_on`): the machine that ran the build step, which for a step shipped
  with the repository (`outputs/mini-trained/`) is not the machine running the notebook. The build records the
  kernels it ran with (`helpers.backends.mini.numerics.numeric_paths`), not the CPU's name, so that is what the
  label says.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from helpers.report.plots import plt, running_mean


LN2 = math.log(2.0)


def _unigram(codes: torch.Tensor, size: int) -> torch.Tensor:
    """Add-0.5 unigram [size] from codes [N]."""
    counts = torch.bincount(codes, minlength=size)[:size].double()
    return (counts + 0.5) / (counts.sum() + 0.5 * size)


def _conditional_ce(context: torch.Tensor, target: torch.Tensor, held_context: torch.Tensor,
                    held_target: torch.Tensor, context_size: int, size: int, prior: torch.Tensor) -> float:
    """Held-out CE (bits) of p(target | context), counts on the training pairs plus size x prior pseudo-counts."""
    joint = torch.zeros(context_size, size, dtype=torch.float64, device=target.device)
    joint.index_put_((context, target), torch.ones_like(target, dtype=torch.float64), accumulate=True)
    p = (joint + size * prior) / (joint.sum(1, keepdim=True) + size)
    return float(-p[held_context, held_target].log().mean()) / LN2


def _previous_frame_pairs(utterances: list[torch.Tensor], k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(c_k of frame f-1, c_k of frame f) over every frame f >= 1 of every utterance ([T, 16] each)."""
    return (torch.cat([u[:-1, k] for u in utterances]), torch.cat([u[1:, k] for u in utterances]))


def level_statistics(train: list[torch.Tensor], held: list[torch.Tensor], sizes: list[int]) -> list[dict]:
    """One row per level: usage, H, H_given_lower (None for c0), H_given_previous_frame (bits), size (V_k).

    train, held: codes per utterance, [T_i, 16] each; sizes: the 16 codebook sizes (codes >= a size are clipped to
    the last code: a model's out-of-codebook sample, which `encode` never makes)."""
    if not train or not held:
        raise ValueError("level_statistics needs training and held-out utterances")
    clip = torch.tensor([s - 1 for s in sizes], device=train[0].device)
    train, held = [u.clamp(max=clip) for u in train], [u.clamp(max=clip) for u in held]
    tr, he = torch.cat(train), torch.cat(held)
    rows = []
    for k, size in enumerate(sizes):
        uni = _unigram(tr[:, k], size)
        plug = torch.bincount(tr[:, k], minlength=size).double() / len(tr)
        usage = float(-(plug[plug > 0] * plug[plug > 0].log()).sum()) / math.log(size)
        lower = None if k == 0 else _conditional_ce(tr[:, k - 1], tr[:, k], he[:, k - 1], he[:, k], sizes[k - 1],
                                                    size, uni)
        prev_tr, prev_he = _previous_frame_pairs(train, k), _previous_frame_pairs(held, k)
        previous = _conditional_ce(*prev_tr, *prev_he, size, size, uni)
        rows.append(dict(level=k, size=size, usage=usage, H=float(-uni[he[:, k]].log().mean()) / LN2,
                         H_given_lower=lower, H_given_previous_frame=previous))
    return rows


def level_table(levels: list[dict], model_ce_nats: list[float] | None = None,
                log_mel_errors: dict | None = None) -> list[dict]:
    """Notebook 01's table of `level_statistics` rows, in bits. model_ce_nats: the trained model's held-out
    cross-entropy per level c0..c15 (nats, shown in bits); log_mel_errors: {levels decoded: relative log-mel error},
    shown for c0..c_k as the entry k + 1 (both given on the `mini` backend only)."""
    table = []
    for r in levels:
        row = {"level": f"c{r['level']}", "V (codebook size)": r["size"], "usage (H / log2 V)": r["usage"],
               "H(c_k)": r["H"], "H(c_k | c_k-1)": r["H_given_lower"],
               "H(c_k | previous frame)": r["H_given_previous_frame"]}
        if model_ce_nats is not None:
            row["model CE given all it sees"] = model_ce_nats[r["level"]] / LN2
        if log_mel_errors is not None:
            row["log-mel error with c0..c_k"] = log_mel_errors[r["level"] + 1]
        table.append(row)
    return table


def level_gains(levels: list[dict]) -> dict[str, float]:
    """Over levels 1.. the mean share of a level's entropy H that the level below ("lower") and the same level in the
    previous frame ("previous frame") remove: mean of 1 - H(c_k | context) / H(c_k)."""
    deep = [r for r in levels if r["level"] >= 1]
    if not deep:
        raise ValueError("level_gains needs rows of levels 1 and above")
    return {"lower": sum(1 - r["H_given_lower"] / r["H"] for r in deep) / len(deep),
            "previous frame": sum(1 - r["H_given_previous_frame"] / r["H"] for r in deep) / len(deep)}


NO_CHANGE = 0.02                    # PER: a smaller difference between two level counts is not read as a change


def round_trip_rows(by_level: dict) -> list[dict]:
    """Notebook 01's table of `helpers.experiment.stages.codec_round_trip.codec_levels_per`'s result ({"levels": [k],
    "per": {lang: [PER per k]}, "mean": [PER per k]}): one row per number of levels decoded."""
    return [{"levels decoded": f"c0..c{k - 1}" if k > 1 else "c0", **{lang: per[i] for lang, per in by_level["per"].items()},
             "mean": by_level["mean"][i]} for i, k in enumerate(by_level["levels"])]


def round_trip_sentence(by_level: dict) -> str:
    """What the deeper levels add to the recogniser's PER (mean over languages): c0 alone against all levels, and a
    level count worse than either end by more than NO_CHANGE, if there is one."""
    means, levels = by_level["mean"], by_level["levels"]
    first, full = means[0], means[-1]
    why = ("they add nothing the recogniser uses: what they code (voice, prosody, where in the phoneme a frame lies) "
           "makes speech sound like its speaker, not easier to tell apart" if full > first - NO_CHANGE else
           "they carry phonetic detail that each phoneme's mean frame lacks")
    worst = max(range(len(means)), key=means.__getitem__)
    part = (f" Part of the stack is worse than either end: {means[worst]:.3f} with {levels[worst]} levels (the first "
            "groups refined, the rest left at the phoneme's mean)." if means[worst] > max(first, full) + NO_CHANGE else "")
    return (f"`c0` alone (each phoneme's mean frame) gives a mean PER of {first:.3f}, all {levels[-1]} levels "
            f"{full:.3f}: {why}.{part}")


MOST_SEGMENTS = 4         # more turns than this are said as a fluctuation, not one by one


def turning_points(values: Sequence[float], tolerance: float = 0.1) -> list[int]:
    """Indices of the first value, of every turn and of the last value. A turn is an extreme the curve then leaves by
    more than `tolerance` x (max - min) the other way (smaller wiggles are not turns). [] for no value."""
    v = [float(x) for x in values]
    if not v:
        return []
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance is a share of the curve's range, in [0, 1); got {tolerance}")
    tol = tolerance * (max(v) - min(v))
    points, direction, extreme = [0], 0, 0
    for i in range(1, len(v)):
        if direction == 0:
            if abs(v[i] - v[0]) > tol:
                direction, extreme = (1 if v[i] > v[0] else -1), i
        elif direction * (v[i] - v[extreme]) >= 0:
            extreme = i                                    # further the same way
        elif direction * (v[extreme] - v[i]) > tol:
            points.append(extreme)                         # left the extreme by more than tol: a turn
            direction, extreme = -direction, i
    if points[-1] != len(v) - 1:
        points.append(len(v) - 1)
    return points


def trend_words(steps: Sequence, values: Sequence[float], digits: int = 3, tolerance: float = 0.1) -> str:
    """How `values` (at `steps`) went, from `turning_points`: "fell from a to b", "rose from a to b (step s), then
    fell to c (step t)", "stayed at a" (no change larger than rounding), or "went up and down n times between lo and
    hi, from a to b" (more than MOST_SEGMENTS segments). Values with `digits` decimals."""
    if len(steps) != len(values) or not values:
        raise ValueError(f"need as many steps as values, at least one; got {len(steps)} and {len(values)}")

    def f(x):
        return f"{x:.{digits}f}"

    points = turning_points(values, tolerance)
    if len(points) < 2 or f(min(values)) == f(max(values)):
        return f"stayed at {f(values[0])}"
    segments = list(zip(points, points[1:]))
    if len(segments) > MOST_SEGMENTS:
        return (f"went up and down {len(segments) - 1} times between {f(min(values))} and {f(max(values))}, from "
                f"{f(values[0])} to {f(values[-1])}")

    def moved(a, b):
        return "rose" if values[b] > values[a] else "fell"

    a, b = segments[0]
    words = f"{moved(a, b)} from {f(values[a])} to {f(values[b])}"
    if len(segments) == 1:
        return words
    words += f" (step {steps[b]})"
    return words + "".join(f", then {moved(a, b)} to {f(values[b])} (step {steps[b]})" for a, b in segments[1:])


WINDOW = 20                                                  # steps per running mean of the train curves


def mini_training_curves(history: dict):
    """history: `Mini.history["training"]` (helpers.backends.mini.train.MiniTrainResult as a dict). Left: talker CE
    per frame (joint phase); right: code-predictor CE per position through the joint phase and the code-predictor
    phase (its steps continue the x axis), the kept step marked. Train lines are 20-step running means, each plotted
    at its window's last step, every step faint behind it."""
    val = history.get("validation") or []
    joint = [v for v in val if v["phase"] == "joint"]
    phase2 = [v for v in val if v["phase"] == "predictor"]
    n1 = len(history["talker_loss"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    train_label = f"train (running mean over {WINDOW} steps)"
    for ax, train, key, title in ((left, history["talker_loss"], "talker", "talker (c0)"),
                                  (right, history["predictor_loss"], "predictor", "code predictor (c1..c15)")):
        steps, mean = running_mean(train, WINDOW)
        ax.plot(np.arange(len(train)), train, color="C0", lw=0.5, alpha=0.2)
        ax.plot(steps - 1, mean, color="C0", label=f"{train_label}, joint phase")
        ax.plot([v["step"] for v in joint], [v[key] for v in joint], "o-", color="C1", label="held out, joint phase")
        ax.set(xlabel="training step (batch)", ylabel="cross-entropy (nats per code)", title=title)
    if phase2:
        loss = history["predictor_phase_loss"]
        steps, mean = running_mean(loss, WINDOW)
        right.plot(n1 + np.arange(len(loss)), loss, color="C2", lw=0.5, alpha=0.2)
        right.plot(n1 + steps - 1, mean, color="C2", label=f"{train_label}, code-predictor phase")
        right.plot([n1 + v["step"] for v in phase2], [v["predictor"] for v in phase2], "s-", color="C3",
                   label="held out, code-predictor phase")
        right.axvline(n1 + history["predictor_best_step"], color="k", ls=":", label="weights kept")
    handles, labels = right.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8, frameon=False,
               title="faint: every training step", title_fontsize=8)
    return fig


def held_out_words(training: dict) -> str | None:
    """Notebook 01's sentence on the held-out curves of `training` (`Mini.history["training"]`: "validation",
    [{"step", "phase" ("joint" or "predictor"), "predictor", "talker"}], "talker_loss", "predictor_phase_loss",
    "predictor_best_step"), every turn included (`trend_words`); None where no held-out curve was recorded."""
    val = training.get("validation") or []
    if not val:
        return None
    joint = [v for v in val if v["phase"] == "joint"]
    phase2 = [v for v in val if v["phase"] == "predictor"]

    def said(points, key):
        return trend_words([v["step"] for v in points], [v[key] for v in points])

    text = (f"Held-out code-predictor CE (nats) over the joint phase ({len(training['talker_loss'])} steps): "
            f"{said(joint, 'predictor')}")
    if phase2:
        kept = min(phase2, key=lambda v: v["predictor"])
        text += (f"; over the code-predictor phase ({len(training['predictor_phase_loss'])} steps, counted from its "
                 f"start): {said(phase2, 'predictor')}; the weights kept are step {training['predictor_best_step']}'s "
                 f"({kept['predictor']:.3f})")
    return text + f". Held-out talker CE over the joint phase: {said(joint, 'talker')}."


def built_on(numerics: dict | None) -> str:
    """The label of a build duration, from the model step's recorded numerics ({"aten", "openblas": [...], ...})."""
    if not numerics:
        return "measured on the machine that built the miniature (not recorded; not necessarily this notebook's)"
    parts = [f"ATen kernels {numerics['aten']}"] if numerics.get("aten") else []
    if numerics.get("openblas"):
        parts.append("OpenBLAS " + "/".join(numerics["openblas"]))
    return ("measured on the machine that built the miniature (its numerics.json: "
            + ", ".join(parts or ["no kernels recorded"]) + "), not necessarily this notebook's")


HERE = "measured where this run's miniature build ran (the cache's)"


def build_rows(build_s: dict, shipped, shipped_on: str) -> list[dict]:
    """One row per build step (`Mini.history["build_s"]`: step -> seconds or None) with where it was measured: a
    shipped step (`Mini.history["shipped"]`) `shipped_on` (`built_on(...)`), the others HERE."""
    return [{"build step": k, "seconds": v, "measured": shipped_on if k in shipped else HERE}
            for k, v in build_s.items()]
