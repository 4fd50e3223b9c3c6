"""Per-level statistics of a 16-level codec's codes: how much of each level is predictable, and from what.

For every level k (codebook of V_k codes; V, not K, which names the draft depth), fitted on training utterances and scored on held-out ones, in bits:
- `usage`: the plug-in entropy of c_k on the training frames over log2 V_k (1: every code equally often);
- `H`: the held-out cross-entropy of the smoothed unigram, an estimate of H(c_k);
- `H_given_lower`: of c_k given the level below in the same frame, c_{k-1} (a smoothed bigram), H(c_k | c_{k-1});
- `H_given_previous_frame`: of c_k given the same level in the previous frame, H(c_k | c_k of frame f-1).
What the code predictor reaches given all of c_<k and the talker's state is its own held-out cross-entropy (notebook 01
shows it beside these). Smoothing: counts plus a Dirichlet prior of strength V_k centred on the unigram, so a context
seen rarely falls back to the unigram; a smoothed CE is an upper bound of the entropy it estimates.
"""

from __future__ import annotations

import math

import torch

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
    """Notebook 01's table of `helpers.experiment.codec_round_trip.codec_levels_per`'s result ({"levels": [k],
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
