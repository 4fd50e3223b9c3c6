"""AR vs speculative codes: frame-for-frame agreement, and parity in distribution where they are not identical.

With a float64 inner loop the two decoders return identical codes for the same seed. In float32 or bf16 the tree
call and the sequential calls round differently (GEMMs over N + 1 rows vs 1, attention over other key counts), so
a sample can land on the other side of a CDF boundary: the frame differs, and from there on the talker follows
another (equally likely) trajectory. What must then hold is parity in distribution, per code position:

    cmp = compare_frames(ar_codes, spec_codes)      # identical fraction, where frames first differ
    par = code_parity(torch.cat(ar_codes), torch.cat(spec_codes))    # chi-square per code position, p-values

AR and speculative runs from independent random streams (the paper's parity) are compared run by run:
`run_parity(ar_codes, spec_codes)`, the same chi-square corrected for the frames of one run being dependent.
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
    design_effect: list[float] | None = None   # [P]: `run_parity`'s correction for frames of one run (None: none)

    @property
    def p_min_adjusted(self) -> float:
        """Bonferroni-adjusted smallest p-value over the positions (the family's p-value)."""
        return min(1.0, len(self.p_values) * min(self.p_values))

    @property
    def rejected(self) -> bool:
        """Whether the samples differ in distribution at level `alpha` (family-wise, over all positions)."""
        return self.p_min_adjusted < self.alpha

    def to_dict(self) -> dict:
        out = {"p_values": self.p_values, "samples": list(self.samples), "alpha": self.alpha,
               "p_min_adjusted": self.p_min_adjusted, "rejected": self.rejected}
        return out if self.design_effect is None else {**out, "design_effect": self.design_effect}


def code_parity(a: torch.Tensor, b: torch.Tensor, alpha: float = 1e-3) -> CodeParity:
    """Per code position, does the histogram of a [n, P] match that of b [m, P]? (frames of AR vs speculative runs)"""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1] or not len(a) or not len(b):
        raise ValueError(f"expected codes [n, P] and [m, P] with n, m >= 1, got {tuple(a.shape)} and {tuple(b.shape)}")
    x, y = a.cpu().numpy(), b.cpu().numpy()
    return CodeParity([two_sample_p(x[:, [j]], y[:, [j]]) for j in range(a.shape[1])], (len(a), len(b)), alpha)


def _chi_square(table: np.ndarray) -> np.ndarray:
    """Pearson's statistic of [..., 2, K] contingency tables (no continuity correction) -> [...]."""
    expected = table.sum(-2, keepdims=True) * table.sum(-1, keepdims=True) / table.sum((-2, -1), keepdims=True)
    return (((table - expected) ** 2) / np.where(expected > 0, expected, 1.0)).sum((-2, -1))


def run_parity(a: list[torch.Tensor], b: list[torch.Tensor], alpha: float = 1e-3, permutations: int = 200,
               seed: int = 0) -> CodeParity:
    """`code_parity` for whole runs (a, b: lists of codes [T_i, P] from independent random streams), corrected for
    the frames of one run not being independent (a run's codes follow one trajectory; consecutive frames share a
    phoneme): per position, Pearson's chi-square of the pooled code histograms (categories pooled as in
    `two_sample_p`) divided by its design effect, the mean statistic over `permutations` random reassignments of
    whole runs to the two samples over its degrees of freedom (at least 1; a first-order Rao-Scott correction),
    then referred to chi-square. Frames that were independent would give a design effect near 1."""
    from scipy.stats import chi2

    if not a or not b or any(x.dim() != 2 or x.shape[1] != a[0].shape[1] for x in a + b):
        raise ValueError("expected two non-empty lists of codes [T_i, P] with one P")
    runs = [x.cpu().numpy() for x in a + b]
    owner = np.repeat(np.arange(len(runs)), [len(x) for x in runs])              # run of each frame
    frames = np.concatenate(runs)
    rng = np.random.default_rng(seed)
    shuffled = np.stack([rng.permutation(len(runs)) < len(a) for _ in range(permutations)])   # [perm, runs]
    p_values, effects = [], []
    for j in range(frames.shape[1]):
        cats, inv = np.unique(frames[:, j], return_inverse=True)
        counts = np.zeros((len(runs), len(cats)))
        np.add.at(counts, (owner, inv.ravel()), 1)                                   # [runs, categories]
        rare = counts.sum(0) < MIN_JOINT_COUNT
        counts = np.concatenate([counts[:, ~rare], counts[:, rare].sum(1, keepdims=True)], axis=1)
        counts = counts[:, counts.sum(0) > 0]
        if counts.shape[1] < 2:
            p_values.append(1.0)
            effects.append(1.0)
            continue
        df = counts.shape[1] - 1
        first = np.arange(len(runs)) < len(a)

        def tables(mask):                                                           # [..., runs] -> [..., 2, K]
            in_a = mask.astype(float) @ counts
            return np.stack([in_a, counts.sum(0) - in_a], axis=-2)

        effect = max(1.0, float(_chi_square(tables(shuffled)).mean()) / df)
        p_values.append(float(chi2.sf(float(_chi_square(tables(first))) / effect, df)))
        effects.append(effect)
    return CodeParity(p_values, (int(sum(map(len, a))), int(sum(map(len, b)))), alpha, effects)
