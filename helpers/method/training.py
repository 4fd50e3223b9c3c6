"""Training drafters on teacher-forced (h_t, codes): everything frozen but the drafter's own parameters."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from helpers.method.drafters import Drafter
from helpers.method.checks import positive_int


@dataclass
class TrainConfig:
    """The paper's recipe: Adam, lr 1e-3, batch 32."""

    epochs: int = 1
    lr: float = 1e-3
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self):
        for name in ("epochs", "batch_size"):
            positive_int(name, getattr(self, name))
        if not float(self.lr) > 0:
            raise ValueError(f"lr must be > 0, got {self.lr!r}")


class TeacherForcedHidden:
    """h [F, 15, H] of teacher-forced frames, computed a batch at a time from g [F, H_talker] and codes [F, 16].

    Indexing (h[idx], h[:]) runs the frozen code predictor on those frames only: the whole training set's h
    (F x 15 x H) need not fit in memory (the real model's VoxPopuli set would take tens of GB).
    prenorm: the pre-norm residual r instead; `for_drafter(d)` gives what drafter d reads (the same frames).
    """

    def __init__(self, predictor, g: torch.Tensor, codes: torch.Tensor, prenorm: bool = False):
        self.predictor, self.g, self.codes, self.prenorm = predictor, g, codes, prenorm
        self.shape = torch.Size((g.shape[0], predictor.num_codes, predictor.hidden_size))
        self.device = g.device

    def for_drafter(self, drafter: Drafter) -> "TeacherForcedHidden":
        """The states `drafter` reads: h, or r for a `prenorm` drafter (no copy of g or codes)."""
        if drafter.prenorm == self.prenorm:
            return self
        return TeacherForcedHidden(self.predictor, self.g, self.codes, drafter.prenorm)

    @torch.no_grad()
    def __getitem__(self, idx) -> torch.Tensor:
        return self.predictor.teacher_forced_hidden(self.g[idx], self.codes[idx], prenorm=self.prenorm)


@dataclass
class TrainResult:
    loss_history: list[float] = field(default_factory=list)   # per step, summed CE per frame


def train_drafter(drafter: Drafter, h: torch.Tensor, codes: torch.Tensor, cfg: TrainConfig = TrainConfig(),
                  progress: bool = True) -> TrainResult:
    """Minimise the summed draft cross-entropy. h [B, 15, H] (a tensor or `TeacherForcedHidden`), codes [B, 16].

    h: what the drafter reads (r for a `prenorm` drafter: a `TeacherForcedHidden` gives it by itself)."""
    if isinstance(h, TeacherForcedHidden):
        h = h.for_drafter(drafter)
    params = [p for p in drafter.parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"the {drafter.kind!r} drafter has no trainable parameters")
    if h.shape[0] != codes.shape[0] or h.shape[1] != drafter.num_codes or codes.shape[1] != drafter.num_codes + 1:
        raise ValueError(f"expected h [B, {drafter.num_codes}, H] and codes [B, {drafter.num_codes + 1}], "
                         f"got {tuple(h.shape)} and {tuple(codes.shape)}")
    gen = torch.Generator().manual_seed(cfg.seed)
    optimizer = torch.optim.Adam(params, lr=cfg.lr)
    result = TrainResult()
    steps = cfg.epochs * -(-h.shape[0] // cfg.batch_size)
    bar = tqdm(total=steps, desc=f"train {drafter.kind}", disable=not progress)
    drafter.train()
    for _ in range(cfg.epochs):
        order = torch.randperm(h.shape[0], generator=gen)
        for start in range(0, h.shape[0], cfg.batch_size):
            idx = order[start:start + cfg.batch_size].to(h.device)
            loss = drafter.loss(h[idx].detach(), codes[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            result.loss_history.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{result.loss_history[-1]:.3f}")
    bar.close()
    drafter.eval()
    return result
