"""Per-position diagnostics: which quantity limits tokens/step (docs/method.md).

From teacher-forced (h [B, 15, H], codes [B, 16]) and the target sampler, per start position t = 1..14 (row t-1)
and depth j = 1..K (column j-1), NaN where t + j > 15:

- the target: entropy (nats) and top probability of p_{t+j}, the sampler's distribution of c_{t+j};
- per drafter, its rank-0 draft x of c_{t+j}: acceptance E[p_{t+j}(x)] (the probability that the target's
  draw is the draft) and top-1, P(x = c_{t+j}). "own" is H_{t+j} on its own h_{t+j} (no positional mismatch:
  the reference every drafter from h_t is measured against); "ideal" the argmax of the exact marginal of
  c_{t+j} given h_t (`helpers.method.ceiling.ideal_drafts`), a reference point;
- translation constancy: how constant the mean displacement E[h_{t+j} - h_t] is across t (the hypothesis
  behind offsets shared by every t), after and before the final norm;
- codebook usage of c1..c15: entropy of each codebook's unigram (bits) beside log2(size), the top code's share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from helpers.method.ceiling import ideal_drafts
from helpers.method.drafters import Drafter
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig, target_probs


def _nan_list(x: torch.Tensor) -> list:
    """A tensor as nested lists, NaN as None (JSON)."""
    return [_nan_list(r) for r in x] if x.dim() else (None if math.isnan(float(x)) else float(x))


def _tensor(x) -> torch.Tensor:
    """Nested lists from `_nan_list` (None as NaN) -> a float64 tensor (on the CPU: loaded from JSON)."""
    def nan(v):
        return [nan(e) for e in v] if isinstance(v, list) else (float("nan") if v is None else v)
    return torch.tensor(nan(x), dtype=torch.float64)


def _check(h: torch.Tensor, codes: torch.Tensor, num_codes: int, depth: int) -> None:
    if h.dim() != 3 or h.shape[1] != num_codes or codes.shape != (h.shape[0], num_codes + 1):
        raise ValueError(f"expected h [B, {num_codes}, H] and codes [B, {num_codes + 1}], "
                         f"got {tuple(h.shape)} and {tuple(codes.shape)}")
    if not 1 <= depth < num_codes:
        raise ValueError(f"depth must be in 1..{num_codes - 1}, got {depth}")


@torch.no_grad()
def rank0_drafts(drafter: Drafter, h: torch.Tensor) -> torch.Tensor:
    """A drafter's rank-0 drafts from every h_t (r_t for a `prenorm` drafter). h [B, 15, H] -> [B, 14, K] (long, -1 where t + j > 15)."""
    n, depth = drafter.num_codes, drafter.depth
    out = torch.full((h.shape[0], n - 1, depth), -1, dtype=torch.long, device=h.device)
    for t in range(1, n):
        d = min(depth, n - t)
        out[:, t - 1, :d] = drafter.draft_logits(h[:, t - 1], t, d).argmax(-1)
    return out


@torch.no_grad()
def own_drafts(predictor: CodePredictor, h: torch.Tensor, depth: int) -> torch.Tensor:
    """The own head's argmax, H_{t+j} on h_{t+j}, laid out by (t, j). h [B, 15, H] -> [B, 14, K] (-1 invalid)."""
    n = predictor.num_codes
    own = predictor.logits(h, range(1, n + 1)).argmax(-1)                  # [B, 15]: c_i's argmax from h_i
    out = torch.full((h.shape[0], n - 1, depth), -1, dtype=torch.long, device=h.device)
    for t in range(1, n):
        d = min(depth, n - t)
        out[:, t - 1, :d] = own[:, t:t + d]
    return out


@torch.no_grad()
def own_head_loss(predictor: CodePredictor, h: torch.Tensor, codes: torch.Tensor, depth: int) -> torch.Tensor:
    """`Drafter.loss` of the own heads: H_{t+j} on h_{t+j}, summed over j <= depth and valid t, mean over frames.
    h [B, 15, H], codes [B, 16] -> scalar (the loss a drafter from h_t would reach without positional mismatch)."""
    n = predictor.num_codes
    _check(h, codes, n, depth)
    ce = torch.nn.functional.cross_entropy(predictor.logits(h, range(1, n + 1)).transpose(1, 2).double(),
                                           codes[:, 1:], reduction="none").sum(0)     # [15]: c_i's summed CE
    counts = torch.tensor([min(depth, i - 1) for i in range(1, n + 1)], dtype=ce.dtype, device=ce.device)
    return (ce * counts).sum() / h.shape[0]                                # c_i is drafted from min(K, i-1) starts


@dataclass
class DraftScores:
    """acceptance E[p_{t+j}(draft)] and top1 P(draft = c_{t+j}), each [14, K] (NaN where t + j > 15), frames."""

    acceptance: torch.Tensor
    top1: torch.Tensor
    frames: int

    def by_depth(self) -> tuple[list[float], list[float]]:
        """Means over the valid starts t per depth: ([K], [K])."""
        return self.acceptance.nanmean(0).tolist(), self.top1.nanmean(0).tolist()

    def to_dict(self) -> dict:
        acc, top1 = self.by_depth()
        return {"acceptance": _nan_list(self.acceptance), "top1": _nan_list(self.top1),
                "acceptance_by_depth": acc, "top1_by_depth": top1, "frames": self.frames}

    @classmethod
    def from_dict(cls, d: dict) -> "DraftScores":
        return cls(_tensor(d["acceptance"]), _tensor(d["top1"]), d["frames"])


@dataclass
class TargetStats:
    """Entropy (nats) and top probability of p_i per code position i = 1..15 ([15] each), and laid out by (t, j)."""

    entropy: torch.Tensor
    top_prob: torch.Tensor

    def by_start(self, depth: int) -> tuple[torch.Tensor, torch.Tensor]:
        """([14, K], [14, K]): entry (t-1, j-1) is p_{t+j}'s, NaN where t + j > 15."""
        n = self.entropy.shape[0]
        i = (torch.arange(1, n, device=self.entropy.device)[:, None] + torch.arange(1, depth + 1,
                                                                                   device=self.entropy.device))
        valid = i <= n
        pick = (i.clamp(max=n) - 1)
        nan = torch.tensor(float("nan"), dtype=self.entropy.dtype, device=self.entropy.device)
        return torch.where(valid, self.entropy[pick], nan), torch.where(valid, self.top_prob[pick], nan)

    def to_dict(self) -> dict:
        return {"entropy": self.entropy.tolist(), "top_prob": self.top_prob.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "TargetStats":
        return cls(_tensor(d["entropy"]), _tensor(d["top_prob"]))


@torch.no_grad()
def score_drafts(predictor: CodePredictor, h: torch.Tensor, codes: torch.Tensor, sampler: SamplerConfig,
                 drafts: dict[str, torch.Tensor]) -> tuple[TargetStats, dict[str, DraftScores]]:
    """Target statistics and every draft set's scores against the teacher-forced targets p_{t+j} (given the true
    c_{<t+j}). h [B, 15, H], codes [B, 16], drafts {name: [B, 14, K] long, -1 invalid} on h's device."""
    n = predictor.num_codes
    depth = next(iter(drafts.values())).shape[-1] if drafts else 1
    _check(h, codes, n, depth)
    entropy = torch.zeros(n, dtype=torch.float64, device=h.device)
    top = torch.zeros(n, dtype=torch.float64, device=h.device)
    acc = {k: torch.full((n - 1, depth), float("nan"), dtype=torch.float64, device=h.device) for k in drafts}
    hit = {k: torch.full((n - 1, depth), float("nan"), dtype=torch.float64, device=h.device) for k in drafts}
    for i in range(1, n + 1):                                              # target position c_i
        p = target_probs(predictor.logits(h[:, i - 1:i], [i])[:, 0], sampler).double()      # [B, V]
        entropy[i - 1] = -(p * p.clamp_min(1e-300).log()).sum(-1).mean()
        top[i - 1] = p.max(-1).values.mean()
        for j in range(1, min(depth, i - 1) + 1):                          # start t = i - j >= 1
            for k, x in drafts.items():
                d = x[:, i - j - 1, j - 1]
                acc[k][i - j - 1, j - 1] = p.gather(-1, d.clamp(min=0)[:, None])[:, 0].mean()
                hit[k][i - j - 1, j - 1] = (d == codes[:, i].to(d.device)).double().mean()
    return TargetStats(entropy, top), {k: DraftScores(acc[k], hit[k], h.shape[0]) for k in drafts}


@dataclass
class TranslationConstancy:
    """How well one shared vector per depth describes h_{t+j} - h_t. Per (t, j) [14, K]: `cosine` of the mean
    displacement m_{t,j} = E[h_{t+j} - h_t] to the shared M_j = mean over t of m_{t,j}; per depth [K]:
    `shared_share`, the share of the mean squared displacement E|h_{t+j} - h_t|^2 that M_j explains
    (1 - E|D - M_j|^2 / E|D|^2), `systematic_share`, that of the per-t means (|M_j|^2 / mean_t |m_{t,j}|^2).
    All 1 for a pure translation h_{t+j} = h_t + c_j."""

    cosine: torch.Tensor
    shared_share: torch.Tensor
    systematic_share: torch.Tensor
    mean_norm: torch.Tensor               # |M_j| [K]
    state_norm: float                     # E|h_t| over frames and t: the scale M_j compares to

    def to_dict(self) -> dict:
        return {"cosine": _nan_list(self.cosine), "shared_share": self.shared_share.tolist(),
                "systematic_share": self.systematic_share.tolist(), "mean_norm": self.mean_norm.tolist(),
                "state_norm": self.state_norm}

    @classmethod
    def from_dict(cls, d: dict) -> "TranslationConstancy":
        return cls(*(_tensor(d[k]) for k in ("cosine", "shared_share", "systematic_share", "mean_norm")),
                   d["state_norm"])


@torch.no_grad()
def translation_constancy(h: torch.Tensor, depth: int) -> TranslationConstancy:
    """h [B, 15, H] (after or before the final norm) -> TranslationConstancy over depths 1..depth."""
    if h.dim() != 3 or not 1 <= depth < h.shape[1]:
        raise ValueError(f"expected h [B, positions, H] and depth in 1..positions-1, got {tuple(h.shape)}, {depth}")
    h = h.double()
    n = h.shape[1]
    cosine = torch.full((n - 1, depth), float("nan"), dtype=torch.float64, device=h.device)
    shared, systematic, norm = (torch.zeros(depth, dtype=torch.float64, device=h.device) for _ in range(3))
    for j in range(1, depth + 1):
        disp = h[:, j:] - h[:, :-j]                                        # [B, 15 - j, H]: start t = 1..15-j
        means = disp.mean(0)                                               # m_{t,j} [15 - j, H]
        shared_mean = means.mean(0)                                        # M_j [H]
        cosine[:n - j, j - 1] = torch.nn.functional.cosine_similarity(means, shared_mean[None], dim=-1)
        total = disp.pow(2).sum(-1).mean()
        shared[j - 1] = 1 - (disp - shared_mean).pow(2).sum(-1).mean() / total
        systematic[j - 1] = shared_mean.pow(2).sum() / means.pow(2).sum(-1).mean()
        norm[j - 1] = shared_mean.norm()
    return TranslationConstancy(cosine, shared, systematic, norm, float(h.norm(dim=-1).mean()))


@dataclass
class CodebookUsage:
    """Per codebook ([C] each; the diagnostics: c1..c15, the code predictor's): entropy of the unigram (bits), log2 of the codebook size, the share of
    the most frequent code, the number of codes used; over `frames` frames."""

    entropy_bits: torch.Tensor
    max_bits: torch.Tensor
    top_share: torch.Tensor
    used: torch.Tensor
    frames: int

    def to_dict(self) -> dict:
        return {"entropy_bits": self.entropy_bits.tolist(), "max_bits": self.max_bits.tolist(),
                "top_share": self.top_share.tolist(), "used": self.used.tolist(), "frames": self.frames}

    @classmethod
    def from_dict(cls, d: dict) -> "CodebookUsage":
        return cls(*(_tensor(d[k]) for k in ("entropy_bits", "max_bits", "top_share")), _tensor(d["used"]).long(),
                   d["frames"])


@torch.no_grad()
def codebook_usage(codes: torch.Tensor, sizes: list[int]) -> CodebookUsage:
    """codes [F, C] (long), sizes [C]: each codebook's size -> CodebookUsage (on codes' device)."""
    if codes.dim() != 2 or codes.shape[1] != len(sizes) or codes.shape[0] == 0:
        raise ValueError(f"expected codes [F > 0, {len(sizes)}] (one size per codebook), got {tuple(codes.shape)}")
    rows = []
    for c, size in enumerate(sizes):
        col = codes[:, c]
        if int(col.min()) < 0 or int(col.max()) >= size:
            raise ValueError(f"codebook {c}: codes must lie in 0..{size - 1}, got {int(col.min())}..{int(col.max())}")
        p = torch.bincount(col, minlength=size).double() / col.numel()
        rows.append(torch.stack((-(p[p > 0] * p[p > 0].log2()).sum(), p.new_tensor(math.log2(size)), p.max(),
                                 (p > 0).sum().double())))
    e, m, top, used = torch.stack(rows).T
    return CodebookUsage(e, m, top, used.long(), codes.shape[0])


def share_closed(base: float, value: float, ref: float, min_gap: float = 1e-12) -> float:
    """(value - base) / (ref - base): the share of the base-to-ref gap that `value` closes (NaN when the gap is
    smaller than `min_gap` in size: nothing to split)."""
    return (value - base) / (ref - base) if abs(ref - base) >= min_gap else float("nan")


@dataclass
class Diagnostics:
    """Everything above for one set of frames: target [TargetStats], scores {name: DraftScores} ("own", every
    drafter by kind, "ideal" on a subset), translation {"normed", "prenorm"}, usage, depth."""

    target: TargetStats
    scores: dict[str, DraftScores]
    translation: dict[str, TranslationConstancy]
    usage: CodebookUsage
    depth: int

    def gap_closed(self, drafter: str, base: str = "reused", ref: str = "own") -> list[float]:
        """Per depth: (drafter - base) / (ref - base) of the mean acceptance, the share of the mismatch closed."""
        a, b, r = (self.scores[k].by_depth()[0] for k in (drafter, base, ref))
        return [share_closed(y, x, z) for x, y, z in zip(a, b, r)]

    def to_dict(self) -> dict:
        entropy, top = self.target.by_start(self.depth)
        return {"target": {**self.target.to_dict(), "entropy_by_start": _nan_list(entropy),
                           "top_prob_by_start": _nan_list(top)},
                "drafts": {k: s.to_dict() for k, s in self.scores.items()},
                "translation": {k: c.to_dict() for k, c in self.translation.items()},
                "usage": self.usage.to_dict(), "depth": self.depth}

    @classmethod
    def from_dict(cls, d: dict) -> "Diagnostics":
        """The inverse of `to_dict` (tensors on the CPU)."""
        return cls(TargetStats.from_dict(d["target"]), {k: DraftScores.from_dict(v) for k, v in d["drafts"].items()},
                   {k: TranslationConstancy.from_dict(v) for k, v in d["translation"].items()},
                   CodebookUsage.from_dict(d["usage"]), d["depth"])


@torch.no_grad()
def diagnostics(predictor: CodePredictor, drafters: dict[str, Drafter], g: torch.Tensor, codes: torch.Tensor,
                sampler: SamplerConfig, depth: int, ideal_frames: torch.Tensor | None = None,
                ideal: dict | None = None, sizes: list[int] | None = None,
                ideal_drafted: torch.Tensor | None = None) -> Diagnostics:
    """All diagnostics on teacher-forced frames. g [B, H_talker], codes [B, 16]; drafters {kind: Drafter};
    ideal_frames [n] (long): the frames the ideal drafter is scored on (exact marginals cost depth calls per
    frame and t; None: none), with `ideal` keyword arguments of `ceiling.ideal_drafts` (width, beam), or its drafts
    on those frames computed elsewhere (in frame blocks on several processes), ideal_drafted [n, 14, depth];
    sizes: the codebook sizes of c1..c15 for the usage (default: the predictor's vocabulary each)."""
    r = predictor.teacher_forced_hidden(g, codes, prenorm=True)           # one pass: r, and h = norm(r)
    h = predictor.final_norm(r)
    drafts = {"own": own_drafts(predictor, h, depth)}
    for kind, d in drafters.items():
        if d.depth < depth:
            raise ValueError(f"drafter {kind!r} drafts {d.depth} codes, the diagnostics ask for depth {depth}")
        drafts[kind] = rank0_drafts(d, r if d.prenorm else h)[..., :depth]
    target, scores = score_drafts(predictor, h, codes, sampler, drafts)
    if ideal_frames is not None and len(ideal_frames):
        pick = ideal_frames.to(g.device)
        sub = {"own": drafts["own"][pick]}
        if ideal_drafted is None:
            ideal_drafted, _ = ideal_drafts(predictor, g[pick], codes[pick], sampler, depth, **(ideal or {}))
        sub["ideal"] = ideal_drafted.to(g.device)
        _, sub_scores = score_drafts(predictor, h[pick], codes[pick], sampler, sub)
        scores["own_ideal_frames"], scores["ideal"] = sub_scores["own"], sub_scores["ideal"]
    translation = {"normed": translation_constancy(h, depth),
                   "prenorm": translation_constancy(r, depth)}
    usage = codebook_usage(codes[:, 1:], sizes or [predictor.vocab_size] * predictor.num_codes)   # c1..c15
    return Diagnostics(target, scores, translation, usage, depth)
