"""AR vs speculative codes: frame-for-frame agreement, and parity in distribution where they are not identical.

With a float64 inner loop the two decoders return identical codes for the same seed. In float32 or bf16 the tree
call and the sequential calls round differently (GEMMs over N + 1 rows vs 1, attention over other key counts), so
a sample can land on the other side of a CDF boundary: the frame differs, and from there on the talker follows
another (equally likely) trajectory. What must then hold is parity in distribution, per code position:

    cmp = compare_frames(ar_codes, spec_codes)      # identical fraction, where frames first differ
    par = code_parity(torch.cat(ar_codes), torch.cat(spec_codes))    # chi-square per code position, p-values
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy.stats import chi2_contingency

MIN_JOINT_COUNT = 10            # categories rarer than this (both samples together) are pooled into one


@dataclass
class FrameComparison:
    frames_compared: int        # aligned frames, plus the surplus of the longer run of each pair
    frames_identical: int
    first_difference: list[int]  # [P]: differing aligned frames by the first code position where they differ
    onset: list[int]            # [P]: per run pair that differs, that position in its first differing frame

    @property
    def identical_fraction(self) -> float:
        return self.frames_identical / max(self.frames_compared, 1)

    def to_dict(self) -> dict:
        return {**asdict(self), "identical_fraction": self.identical_fraction}


def compare_frames(a: list[torch.Tensor], b: list[torch.Tensor]) -> FrameComparison:
    """Frame by frame, run by run: a, b lists of codes [T_i, P] (runs of the same seeds; a longer one counts fully)."""
    if len(a) != len(b):
        raise ValueError(f"compare runs of the same seeds: got {len(a)} and {len(b)} runs")
    positions = a[0].shape[1] if a else 0
    first, onset = [0] * positions, [0] * positions
    compared = identical = 0
    for x, y in zip(a, b):
        rows = min(len(x), len(y))
        compared += max(len(x), len(y))
        differ = x[:rows].to(y.device) != y[:rows]                         # [rows, P]
        same = ~differ.any(-1)
        identical += int(same.sum())
        where = differ.to(torch.int8).argmax(-1)[~same].tolist()          # first differing position per frame
        for pos in where:
            first[pos] += 1
        if where:
            onset[where[0]] += 1
    return FrameComparison(compared, identical, first, onset)


def two_sample_p(a: np.ndarray, b: np.ndarray, min_count: int = MIN_JOINT_COUNT) -> float:
    """p-value of a chi-square test that two categorical samples (rows of a [n, k], b [m, k]; each row one category)
    share one distribution; categories with fewer than `min_count` joint counts are pooled. 1.0 if one category."""
    cats, inv = np.unique(np.concatenate([a, b]), return_inverse=True, axis=0)
    inv = inv.ravel()
    table = np.stack([np.bincount(inv[:len(a)], minlength=len(cats)), np.bincount(inv[len(a):], minlength=len(cats))])
    rare = table.sum(0) < min_count
    table = np.concatenate([table[:, ~rare], table[:, rare].sum(1, keepdims=True)], axis=1)
    table = table[:, table.sum(0) > 0]
    return float(chi2_contingency(table)[1]) if table.shape[1] > 1 else 1.0


@dataclass
class CodeParity:
    p_values: list[float]       # [P]: per code position, chi-square two-sample test of the code histograms
    samples: tuple[int, int]    # frames in each sample
    alpha: float

    @property
    def p_min_adjusted(self) -> float:
        """Bonferroni-adjusted smallest p-value over the positions (the family's p-value)."""
        return min(1.0, len(self.p_values) * min(self.p_values))

    @property
    def rejected(self) -> bool:
        """Whether the samples differ in distribution at level `alpha` (family-wise, over all positions)."""
        return self.p_min_adjusted < self.alpha

    def to_dict(self) -> dict:
        return {"p_values": self.p_values, "samples": list(self.samples), "alpha": self.alpha,
                "p_min_adjusted": self.p_min_adjusted, "rejected": self.rejected}


def code_parity(a: torch.Tensor, b: torch.Tensor, alpha: float = 1e-3) -> CodeParity:
    """Per code position, does the histogram of a [n, P] match that of b [m, P]? (frames of AR vs speculative runs)"""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1] or not len(a) or not len(b):
        raise ValueError(f"expected codes [n, P] and [m, P] with n, m >= 1, got {tuple(a.shape)} and {tuple(b.shape)}")
    x, y = a.cpu().numpy(), b.cpu().numpy()
    return CodeParity([two_sample_p(x[:, [j]], y[:, [j]]) for j in range(a.shape[1])], (len(a), len(b)), alpha)
