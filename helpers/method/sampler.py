"""The one sampler: the official sub-talker's, drawn by inverse CDF from a uniform that belongs to the code position.

`target_probs` is the official sampling distribution (transformers' temperature, top-k and top-p warpers); `sample`
draws from it by inverse CDF, so a draw is a function of its uniform. A frame's randomness is drawn up front, one
uniform u_t per code position (`frame_uniforms`), and AR and speculative decoding consume it identically: each
position is sampled exactly once, from its exact conditional, with its own uniform, so the codes equal the AR
decoder's for the same uniforms however many drafts a round accepts (docs/method.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.method.checks import positive_int


@dataclass(frozen=True)
class SamplerConfig:
    """Deployed sub-talker sampling: `subtalker_top_k=50, subtalker_top_p=1.0, subtalker_temperature=0.9`."""

    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 0.9

    def __post_init__(self):
        positive_int("top_k", self.top_k)
        if not 0.0 < float(self.top_p) <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not float(self.temperature) > 0.0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")


def target_probs(logits: torch.Tensor, cfg: SamplerConfig) -> torch.Tensor:
    """p = softmax(top_p(top_k(logits / T))), in at least float32. [..., V] -> [..., V]."""
    scores = logits.to(torch.promote_types(logits.dtype, torch.float32)) / cfg.temperature
    k = min(cfg.top_k, scores.shape[-1])
    kth = torch.topk(scores, k, dim=-1).values[..., -1:]
    scores = scores.masked_fill(scores < kth, float("-inf"))
    if cfg.top_p < 1.0:
        ordered, order = torch.sort(scores, dim=-1)                 # ascending, as transformers does
        cum = ordered.softmax(-1).cumsum(-1)
        drop = cum <= 1.0 - cfg.top_p
        drop[..., -1] = False                                       # keep at least the top token
        scores = scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return scores.softmax(-1)


def sample(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw in vocabulary order. probs [..., V], u [...] in [0, 1) -> tokens [...] (long)."""
    cdf = probs.cumsum(-1)
    x = (u.to(cdf.dtype) * cdf[..., -1]).unsqueeze(-1)
    tokens = torch.searchsorted(cdf, x, right=True).squeeze(-1)
    last = probs.shape[-1] - 1 - (probs.flip(-1) > 0).to(torch.int8).argmax(-1)   # never a zero-mass token
    return torch.minimum(tokens, last)


def draw(logits: torch.Tensor, cfg: SamplerConfig, u: torch.Tensor) -> torch.Tensor:
    """The sampler's draw from logits: `sample(target_probs(logits, cfg), u)`. logits [..., V], u [...] -> [...]."""
    return sample(target_probs(logits, cfg), u)


def frame_uniforms(generator: torch.Generator | None, num_codes: int = 15, batch: int | None = None,
                   device=None) -> torch.Tensor:
    """One frame's randomness: u [num_codes] (or [batch, num_codes]); column t-1 belongs to c_t."""
    shape = (num_codes,) if batch is None else (batch, num_codes)
    gen_device = generator.device if generator is not None else "cpu"
    return torch.rand(shape, generator=generator, dtype=torch.float64, device=gen_device).to(device or gen_device)
