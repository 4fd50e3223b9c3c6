"""Sentences that interpret a run's numbers, built from them (notebooks 03, 04 and 05): the room the code predictor
leaves a drafter, Table 2's gaps from expected to measured, each drafter's lead per language, the split of a gain
between the tree and the drafter, and paired per-language quality tests with their confidence interval and power.
Pure: numbers in, numbers and text out.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats


def expected_gaps(measured: dict[str, float], expected: dict[str, float]) -> dict[str, float]:
    """measured - expected tokens/step per name present in both (a negative gap: the tree delivered less than the
    calibration table promised)."""
    missing = sorted(set(measured) ^ set(expected))
    if missing:
        raise ValueError(f"measured and expected name different drafters: {missing} in only one of them")
    return {k: measured[k] - expected[k] for k in measured}


def gap_sentence(gaps: dict[str, float], per_language: dict[str, float], main: str, n: int) -> str:
    """Table 2 in words: each drafter's gap from expected to measured at N = n, and the main drafter's per language
    (`per_language`: language -> measured - expected)."""
    worst = min(gaps, key=gaps.get)
    langs = ", ".join(f"{lang} {g:+.3f}" for lang, g in per_language.items())
    spread = max(per_language.values()) - min(per_language.values()) if per_language else float("nan")
    return (f"Measured minus expected tokens/step at N = {n}: " + ", ".join(f"{k} {g:+.3f}" for k, g in gaps.items())
            + (f". The largest shortfall is {worst}'s ({gaps[worst]:+.3f}): the calibration table, measured on other "
               "utterances, is an estimate." if gaps[worst] < 0 else ". Every drafter met or beat its expectation.")
            + f" The main drafter ({main}) per language: {langs} (a spread of {spread:.3f}).")


def language_lead_sentence(by_language: dict[str, dict[str, float]], train_languages: list[str], n: int) -> str:
    """Each drafter's measured lead over the reused heads per language at N = n (`by_language`: drafter -> language ->
    tokens/step, with "reused"), and where it is largest, against the languages the drafters were trained on."""
    base = by_language["reused"]
    parts = []
    for kind, langs in by_language.items():
        if kind == "reused":
            continue
        lead = {lang: v - base[lang] for lang, v in langs.items()}
        best, worst = max(lead, key=lead.get), min(lead, key=lead.get)
        trained = "a training language" if best in train_languages else "not a training language"
        parts.append(f"{kind} " + ", ".join(f"{lang} {g:+.3f}" for lang, g in lead.items())
                     + f" (largest on {best}, {trained}; smallest on {worst})")
    return (f"Measured lead over the reused heads per language at N = {n}: " + "; ".join(parts)
            + f". The drafters are trained on {', '.join(train_languages)} frames only.")


IDEAL_REFERENCE = ("a reference point: what a drafter of the model's own most probable codes would expect in the same "
                   "tree, not an upper bound on a real drafter")     # the ideal drafter, said the same everywhere


def room_sentence(expected: dict[str, dict[int, float]], ideal: dict[int, float], n: int) -> str:
    """How much room the code predictor leaves a drafter at N = n: each drafter's expected tokens/step against the
    ideal drafter's (the exact marginals of the predictor's own sampling, `Calibration.ceiling_expected`)."""
    lines = ", ".join(f"{k} {by_n[n]:.3f} ({by_n[n] - ideal[n]:+.3f})" for k, by_n in expected.items())
    text = (f"At N = {n} the ideal drafter, which drafts the most probable codes of the code predictor's own sampling "
            f"distribution, would expect {ideal[n]:.3f} tokens/step; the drafters expect {lines}.")
    if "reused" in expected:
        text += (f" Its lead over the reused heads, {ideal[n] - expected['reused'][n]:+.3f}, measures the room a "
                 f"drafter reading h_t has here. It is {IDEAL_REFERENCE}: a trained drafter can beat "
                 f"the ideal drafter where its enumeration misses mass, and a drafter that is not greedy per depth "
                 f"could do better still; both stay small while the code predictor's own distribution is as spread "
                 f"out as below.")
    return text + " (The ideal drafter's table has 8 ranks and comes from `ceiling_frames` frames: an estimate.)"


def tree_drafter_split(chain: float, tree_same_heads: float, tree_main: float) -> dict[str, float]:
    """A gain over a chain of the reused heads split in two: the tree's (the same heads in the calibrated tree) and
    the drafter's (the main drafter in that same tree)."""
    return {"chain": chain, "tree": tree_same_heads - chain, "drafter": tree_main - tree_same_heads,
            "total": tree_main - chain}


def paired_test(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], alpha: float = 0.05,
                power: float = 0.8) -> dict:
    """Paired test of two systems' per-utterance error rates. a, b: [seed][utterance] (the same utterances in the
    same order in every seed of both); each utterance is averaged over seeds, then paired (b - a).
    -> {"n", "mean_a", "mean_b", "diff" (mean of b - a), "ci" (1 - alpha, t), "p" (two-sided paired t; 1.0 where every
        difference is 0), "detectable" (the difference the test finds with probability `power` at `alpha`)}."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 2 or a.shape[1] != b.shape[1] or a.shape[1] < 2:
        raise ValueError(f"need [seed][utterance] scores of at least 2 utterances, the same for both; got {a.shape}, "
                         f"{b.shape}")
    ua, ub = a.mean(axis=0), b.mean(axis=0)
    d, n = ub - ua, a.shape[1]
    sd = float(d.std(ddof=1))
    t = stats.t.ppf(1 - alpha / 2, n - 1)
    half = t * sd / math.sqrt(n)
    p = float(stats.ttest_rel(ub, ua).pvalue) if sd > 0 else 1.0
    detectable = (t + stats.t.ppf(power, n - 1)) * sd / math.sqrt(n)
    return {"n": n, "mean_a": float(ua.mean()), "mean_b": float(ub.mean()), "diff": float(d.mean()),
            "ci": [float(d.mean() - half), float(d.mean() + half)], "p": p, "detectable": float(detectable),
            "alpha": alpha, "power": power}


def intelligibility(per_truth: float | None, per_codec: float | None, per_ar: float) -> str:
    """How intelligible the synthesis is, from its PER against the original audio's and the codec round trip's."""
    level = ("mostly unintelligible" if per_ar > 0.5 else "partly intelligible" if per_ar > 0.25 else "intelligible")
    refs = ", ".join(f"{name} {v:.1%}" for name, v in (("original audio", per_truth), ("codec round trip", per_codec))
                     if v is not None)
    return f"the synthesis is {level} (PER {per_ar:.1%}" + (f"; {refs}" if refs else "") + ")"


NO_SIGNAL_WER = 0.8      # an ASR whose WER on the codec round trip is above this recognises almost nothing


def asr_has_signal(wer_codec: float | None) -> bool | None:
    """Whether the ASR's WER can say anything: None where there is no WER, False where even the ground-truth codes
    decoded score above NO_SIGNAL_WER."""
    return None if wer_codec is None else wer_codec <= NO_SIGNAL_WER


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
