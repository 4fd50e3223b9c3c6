"""Training drafters on teacher-forced (h_t, codes): everything frozen but the drafter's own parameters."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from helpers.method.decoding import Decoder
from helpers.method.drafters import Drafter
from helpers.method.checks import int_at_least, positive_int
from helpers.method.sampler import SamplerConfig, frame_uniforms


@dataclass
class TrainConfig:
    """The paper's recipe: Adam, lr 1e-3, batch 32, `epochs` passes. With `patience` > 0 (and held-out data),
    `epochs` is the most passes: training stops once `patience` epochs in a row bring no lower held-out loss, and
    the weights of the best epoch are kept (early stopping, as the Medusa and EAGLE recipes train their heads).
    With `soft_labels` (a sampler) the loss takes the code predictor's own sampling distributions under it as labels
    (`soft_labels`, `Drafter.loss(probs=)`), in training and held out."""

    epochs: int = 1
    lr: float = 1e-3
    batch_size: int = 32
    seed: int = 0
    patience: int = 0
    soft_labels: SamplerConfig | None = None

    def __post_init__(self):
        for name in ("epochs", "batch_size"):
            positive_int(name, getattr(self, name))
        int_at_least("patience", self.patience, 0)
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


@torch.no_grad()
def sampled_targets(predictor, g: torch.Tensor, codes: torch.Tensor, sampler: SamplerConfig,
                    generator: torch.Generator, batch_size: int = 512) -> torch.Tensor:
    """Self-distillation targets (Medusa-2's recipe): the code predictor's own draws where the codec's codes were.

    g [F, H_talker], codes [F, 16] -> [F, 16] on codes' device: c0 as given, c1..c15 sampled autoregressively with
    `sampler` from each frame's (g, c0), one frame's uniforms per frame from `generator`. A drafter is accepted
    when it guesses the predictor's draws, so these are what it should learn; the codec's codes are the data's."""
    u = frame_uniforms(generator, predictor.num_codes, batch=g.shape[0], device=codes.device)
    ar = Decoder(predictor, sampler)
    drawn = [ar.decode_frame(g[i:i + batch_size], codes[i:i + batch_size, 0], u[i:i + batch_size]).codes
             for i in range(0, g.shape[0], batch_size)]
    return torch.cat((codes[:, :1], torch.cat(drawn).to(codes.dtype)), dim=1)


@dataclass
class TrainResult:
    loss_history: list[float] = field(default_factory=list)   # per step, summed CE per frame
    val_loss: list[float] = field(default_factory=list)       # held-out summed CE per frame: before training, per epoch
    best_epoch: int | None = None                             # the epoch whose weights were kept (0: untrained)
                                                              # (the last, without early stopping)


MATERIALISE_BYTES = 1 << 30      # a TeacherForcedHidden up to this size is computed once, not once per batch


def fits_in_memory(h: TeacherForcedHidden) -> bool:
    """Whether h's states, computed whole, take at most MATERIALISE_BYTES."""
    return h.shape.numel() * h.g.element_size() <= MATERIALISE_BYTES


def materialised(h):
    """h as a tensor where it fits in MATERIALISE_BYTES (computed once: every epoch then reads it), else as given."""
    if isinstance(h, TeacherForcedHidden) and fits_in_memory(h):
        return torch.cat([h[i:i + 4096] for i in range(0, h.shape[0], 4096)])
    return h


class _LazyDistributions:
    """p[idx] = drafter.target_distribution(h[idx], sampler), computed when read."""

    def __init__(self, drafter: Drafter, h, sampler: SamplerConfig):
        self.drafter, self.h, self.sampler = drafter, h, sampler

    def __getitem__(self, idx) -> torch.Tensor:
        return self.drafter.target_distribution(self.h[idx], self.sampler)


def soft_labels(drafter: Drafter, h, sampler: SamplerConfig):
    """The code predictor's sampling distributions p [F, 15, V] on the frames h holds, as `drafter` reads them (h, or
    r for a `prenorm` drafter): labels fixed by the frames, so computed once (a tensor) where h is a tensor and p fits
    in MATERIALISE_BYTES, else a batch at a time on indexing (p[idx])."""
    lazy = _LazyDistributions(drafter, h, sampler)
    vocab = drafter.head_weight(1, 1).shape[0]
    if not isinstance(h, torch.Tensor) or h.shape[0] * h.shape[1] * vocab * h.element_size() > MATERIALISE_BYTES:
        return lazy
    return torch.cat([lazy[i:i + 4096] for i in range(0, h.shape[0], 4096)])


@torch.no_grad()
def held_out_loss(drafter: Drafter, h, codes: torch.Tensor, batch: int = 1024, probs=None) -> float:
    """Summed draft CE per frame on held-out h [B, 15, H] (tensor or `TeacherForcedHidden`), codes [B, 16]; with
    `probs` (`soft_labels`), against the code predictor's sampling distributions on those frames."""
    drafter.eval()
    total = sum(float(drafter.loss(h[i:i + batch], codes[i:i + batch], None if probs is None else probs[i:i + batch]))
                * len(codes[i:i + batch])
                for i in range(0, len(codes), batch))
    return total / len(codes)


def train_drafter(drafter: Drafter, h: torch.Tensor, codes: torch.Tensor, cfg: TrainConfig = TrainConfig(),
                  progress: bool = True, val: tuple | None = None) -> TrainResult:
    """Minimise the summed draft cross-entropy. h [B, 15, H] (a tensor or `TeacherForcedHidden`), codes [B, 16].

    h: what the drafter reads (r for a `prenorm` drafter: a `TeacherForcedHidden` gives it by itself).
    val: held-out (h, codes): the loss after every epoch (`result.val_loss`); early stopping (`cfg.patience`) needs it."""
    if isinstance(h, TeacherForcedHidden):
        h = h.for_drafter(drafter)
    if val is not None and isinstance(val[0], TeacherForcedHidden):
        val = (materialised(val[0].for_drafter(drafter)), val[1])
    if cfg.patience and val is None:
        raise ValueError("early stopping (patience > 0) needs held-out data: val=(h, codes)")
    params = [p for p in drafter.parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"the {drafter.kind!r} drafter has no trainable parameters")
    if h.shape[0] != codes.shape[0] or h.shape[1] != drafter.num_codes or codes.shape[1] != drafter.num_codes + 1:
        raise ValueError(f"expected h [B, {drafter.num_codes}, H] and codes [B, {drafter.num_codes + 1}], "
                         f"got {tuple(h.shape)} and {tuple(codes.shape)}")
    h = materialised(h)
    probs = val_probs = None
    if cfg.soft_labels is not None:
        probs = soft_labels(drafter, h, cfg.soft_labels)
        val_probs = None if val is None else soft_labels(drafter, val[0], cfg.soft_labels)
    gen = torch.Generator().manual_seed(cfg.seed)
    optimizer = adam(params, cfg.lr)
    result = TrainResult()
    best_state, best = None, 0
    if val is not None:
        result.val_loss.append(held_out_loss(drafter, *val, probs=val_probs))
        best_state = state_snapshot(drafter)
    steps = cfg.epochs * -(-h.shape[0] // cfg.batch_size)
    bar = tqdm(total=steps, desc=f"train {drafter.kind}", disable=not progress)
    for epoch in range(1, cfg.epochs + 1):
        drafter.train()
        order = torch.randperm(h.shape[0], generator=gen)
        losses = []                                   # on the device: read once per epoch, not once per step
        for start in range(0, h.shape[0], cfg.batch_size):
            idx = order[start:start + cfg.batch_size].to(h.device)
            loss = drafter.loss(h[idx].detach(), codes[idx], None if probs is None else probs[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
            bar.update(1)
        result.loss_history.extend(torch.stack(losses).tolist())
        bar.set_postfix(loss=f"{result.loss_history[-1]:.3f}")
        if val is not None:
            result.val_loss.append(held_out_loss(drafter, *val, probs=val_probs))
            if result.val_loss[-1] < result.val_loss[best]:
                best_state, best = state_snapshot(drafter), epoch
            elif cfg.patience and epoch - best >= cfg.patience:
                break
    bar.close()
    if cfg.patience:
        drafter.load_state_dict(best_state)
    result.best_epoch = best if cfg.patience else epoch
    drafter.eval()
    return result


def adam(params: list, lr: float) -> torch.optim.Adam:
    """Adam, fused (one kernel per step for all parameters) on the CPU and CUDA: Medusa's 45 heads took 16 ms a step
    in the per-tensor loop, 4 ms fused, on one CPU core in float64."""
    return torch.optim.Adam(params, lr=lr, fused=params[0].device.type in ("cpu", "cuda"))


def state_snapshot(module: torch.nn.Module) -> dict:
    """A detached copy of `module`'s state (the weights to restore when a later epoch is worse)."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@dataclass
class SweepResult:
    lr: float                                   # the learning rate kept (lowest best held-out loss)
    result: TrainResult                         # its training
    best_val: dict[float, float]                # lr -> the held-out loss of its kept weights


def sweep_choice(results: dict[float, TrainResult]) -> SweepResult:
    """The learning rate whose kept weights have the lowest held-out loss (ties: the first listed), from the sweep's
    trainings {lr: result} (each with held-out losses)."""
    if not results:
        raise ValueError("a sweep needs at least one training")
    scores = {lr: r.val_loss[r.best_epoch] for lr, r in results.items()}
    lr = min(scores, key=scores.get)                 # the first of equal losses
    return SweepResult(lr, results[lr], scores)
