"""Training the miniature as the official fine-tuning recipe trains Qwen3-TTS.

Teacher forcing over whole utterances: the talker reads the prompt and the ground-truth frames
(`helpers.adapter.talker_inputs`), its cross-entropy is taken on every frame's `c0` and the final codec EOS;
the code predictor reads `[g_f, E0(c0), ..., E14(c14)]` for every frame f and its cross-entropy is
taken on `c1..c15`. Loss = talker CE + 0.3 x code-predictor CE (the recipe's weighting). Cross-entropy
is computed here from the logits (qwen_tts 0.1.1's own sub-talker loss is shifted by one position).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from helpers.adapter.global_rng import global_rng
from helpers.adapter.talker_inputs import Utterance, batch_inputs, talker_states
from helpers.method.checks import int_at_least, positive_int
from helpers.method.training import state_snapshot


MIN_SCHEDULE_STEPS = 11           # OneCycleLR(pct_start=0.1) divides by (a tenth of its steps - 1): it must exceed 0


@dataclass(frozen=True)
class MiniTrainConfig:
    """Phase 1 (the recipe): `epochs` over whole utterances, talker + code predictor. Phase 2 (optional): the code
    predictor alone for `predictor_steps` on the frozen talker's teacher-forced states, batches of
    `predictor_batch` frames, keeping the weights of the lowest held-out CE (checked every `val_every` steps)."""

    epochs: int = 10
    lr: float = 2e-3
    batch_size: int = 16
    sub_loss_weight: float = 0.3
    seed: int = 0
    non_streaming_mode: bool = False
    predictor_steps: int = 0
    predictor_lr: float = 1e-3
    predictor_batch: int = 256
    val_every: int = 50

    def __post_init__(self):
        for name in ("epochs", "batch_size", "predictor_batch", "val_every"):
            positive_int(name, getattr(self, name))
        int_at_least("predictor_steps", self.predictor_steps, 0)
        if 0 < self.predictor_steps < MIN_SCHEDULE_STEPS:
            raise ValueError(f"predictor_steps must be 0 or at least {MIN_SCHEDULE_STEPS} (the one-cycle schedule warms "
                             f"up over a tenth of its steps), got {self.predictor_steps}")
        if not float(self.lr) > 0 or not float(self.predictor_lr) > 0 or not float(self.sub_loss_weight) >= 0:
            raise ValueError(f"lr and predictor_lr must be > 0 and sub_loss_weight >= 0, got {self.lr!r}, "
                             f"{self.predictor_lr!r}, {self.sub_loss_weight!r}")


@dataclass
class MiniTrainResult:
    talker_loss: list[float] = field(default_factory=list)       # phase 1, per step, mean CE per frame (nats)
    predictor_loss: list[float] = field(default_factory=list)    # phase 1, per step, mean CE per code position
    predictor_phase_loss: list[float] = field(default_factory=list)   # phase 2, per step
    validation: list[dict] = field(default_factory=list)         # {phase, step, talker, predictor}: held-out CE
    predictor_best_step: int | None = None                       # phase 2 step whose weights were kept
    seconds: dict = field(default_factory=dict)                  # wall time per phase (joint, predictor)


def _teacher_forced(model: nn.Module, batch: list[Utterance], non_streaming: bool):
    """One teacher-forced talker pass: (c0 logits [F+1, V], c0 labels [F+1], g [F, H], codes [F, 16]) over the batch."""
    inputs, mask, starts, labels = batch_inputs(model, batch, non_streaming)
    out = model.talker(inputs_embeds=inputs, attention_mask=mask, output_hidden_states=True)
    hidden = out.hidden_states[0][-1]                                            # [B, L, H]
    c0_logits, g = [], []
    for row, (start, y, u) in enumerate(zip(starts, labels, batch)):
        c0_logits.append(out.logits[row, start:start + len(y)])
        g.append(hidden[row, start:start + u.codes.shape[0]])
    return torch.cat(c0_logits), torch.cat(labels), torch.cat(g), torch.cat([u.codes for u in batch])


def _predictor_ce(model: nn.Module, g: torch.Tensor, codes: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Code-predictor CE on c1..c15 from g [F, H] and codes [F, 16]: mean, or [15] sums per position ('sum')."""
    logits, _ = model.talker.forward_sub_talker_finetune(codes, g)                # [F, 15, V]
    if reduction == "mean":
        return F.cross_entropy(logits.flatten(0, 1).float(), codes[:, 1:].flatten())
    return F.cross_entropy(logits.float().transpose(1, 2), codes[:, 1:], reduction="none").sum(0)


def utterance_losses(model: nn.Module, batch: list[Utterance], non_streaming: bool = False):
    """Teacher-forced (talker CE per frame, code-predictor CE per code position) over a batch, both means."""
    c0_logits, c0_labels, g, codes = _teacher_forced(model, batch, non_streaming)
    return F.cross_entropy(c0_logits.float(), c0_labels), _predictor_ce(model, g, codes)


@torch.no_grad()
def predictor_validation(model: nn.Module, g: torch.Tensor, codes: torch.Tensor, batch: int = 1024) -> torch.Tensor:
    """Held-out code-predictor CE per code position [15] (nats) from teacher-forced g [F, H], codes [F, 16]."""
    model.eval()
    total = sum(_predictor_ce(model, g[i:i + batch], codes[i:i + batch], "sum") for i in range(0, len(g), batch))
    return total / len(g)


@torch.no_grad()
def validation_losses(model: nn.Module, data: list[Utterance], batch_size: int = 16,
                      non_streaming: bool = False) -> tuple[float, torch.Tensor]:
    """(talker CE per frame, code-predictor CE per code position [15]) on held-out utterances, in nats."""
    model.eval()
    c0_sum, c0_n, gs, cs = 0.0, 0, [], []
    for start in range(0, len(data), batch_size):
        c0_logits, c0_labels, g, codes = _teacher_forced(model, data[start:start + batch_size], non_streaming)
        c0_sum += float(F.cross_entropy(c0_logits.float(), c0_labels, reduction="sum"))
        c0_n += len(c0_labels)
        gs.append(g)
        cs.append(codes)
    return c0_sum / c0_n, predictor_validation(model, torch.cat(gs), torch.cat(cs))


def _record(result: MiniTrainResult, phase: str, step: int, talker: float, predictor: torch.Tensor) -> None:
    result.validation.append(dict(phase=phase, step=step, talker=talker, predictor=float(predictor.mean())))


def train_mini(model: nn.Module, data: list[Utterance], cfg: MiniTrainConfig = MiniTrainConfig(),
               progress: bool = True, val: list[Utterance] | None = None) -> MiniTrainResult:
    """Phase 1: AdamW over all of the miniature's weights, `cfg.epochs` passes in a seeded order; phase 2 (if
    `cfg.predictor_steps`): the code predictor alone on the frozen talker's states. `val` (held-out utterances):
    CE every `cfg.val_every` steps into `result.validation`; phase 2 needs it (it keeps the best weights)."""
    if not data:
        raise ValueError("no training utterances")
    if cfg.predictor_steps and not val:
        raise ValueError("predictor_steps > 0 needs held-out utterances (val) to keep the best weights")
    steps = cfg.epochs * -(-len(data) // cfg.batch_size)
    if steps < MIN_SCHEDULE_STEPS:
        raise ValueError(f"{cfg.epochs} epoch(s) of {len(data)} utterances in batches of {cfg.batch_size} make {steps} "
                         f"steps; the one-cycle schedule needs at least {MIN_SCHEDULE_STEPS}: more epochs or utterances")
    with global_rng(cfg.seed):               # the official modules' own draws in training (dropout), if any
        return _train(model, data, cfg, progress, val, steps)


def _train(model: nn.Module, data: list[Utterance], cfg: MiniTrainConfig, progress: bool,
           val: list[Utterance] | None, steps: int) -> MiniTrainResult:
    """`train_mini`'s two phases, its arguments checked."""
    gen = torch.Generator().manual_seed(cfg.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=cfg.lr, total_steps=steps, pct_start=0.1)
    result = MiniTrainResult()
    bar = tqdm(total=steps, desc="train miniature", disable=not progress)
    start_s = time.perf_counter()
    for _ in range(cfg.epochs):
        order = torch.randperm(len(data), generator=gen).tolist()
        for start in range(0, len(data), cfg.batch_size):
            if val and len(result.talker_loss) % cfg.val_every == 0:
                _record(result, "joint", len(result.talker_loss), *validation_losses(model, val))
            model.train()
            talker_ce, sub_ce = utterance_losses(model, [data[i] for i in order[start:start + cfg.batch_size]],
                                                 cfg.non_streaming_mode)
            loss = talker_ce + cfg.sub_loss_weight * sub_ce
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            result.talker_loss.append(float(talker_ce.detach()))
            result.predictor_loss.append(float(sub_ce.detach()))
            bar.update(1)
            bar.set_postfix(talker=f"{result.talker_loss[-1]:.2f}", predictor=f"{result.predictor_loss[-1]:.2f}")
    bar.close()
    if val:
        _record(result, "joint", steps, *validation_losses(model, val))
    result.seconds["joint"] = round(time.perf_counter() - start_s, 1)
    if cfg.predictor_steps:
        start_s = time.perf_counter()
        _predictor_phase(model, data, val, cfg, result, gen, progress)
        result.seconds["predictor"] = round(time.perf_counter() - start_s, 1)
    model.eval()
    return result


def _predictor_phase(model: nn.Module, data: list[Utterance], val: list[Utterance], cfg: MiniTrainConfig,
                     result: MiniTrainResult, gen: torch.Generator, progress: bool) -> None:
    """The code predictor alone (its own weights; the talker and E0 frozen) on teacher-forced talker states."""
    g, val_g = (torch.cat(talker_states(model, d, non_streaming=cfg.non_streaming_mode)) for d in (data, val))
    codes, val_codes = (torch.cat([u.codes for u in d]) for d in (data, val))
    val_talker = result.validation[-1]["talker"]                      # the talker is frozen from here on
    params = list(model.talker.code_predictor.parameters())
    optimizer = torch.optim.AdamW(params, lr=cfg.predictor_lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=cfg.predictor_lr,
                                                   total_steps=cfg.predictor_steps, pct_start=0.1)
    best = predictor_validation(model, val_g, val_codes)
    _record(result, "predictor", 0, val_talker, best)
    best, best_state, result.predictor_best_step = float(best.mean()), state_snapshot(model.talker.code_predictor), 0
    order, pos = torch.randperm(len(g), generator=gen), 0
    for step in tqdm(range(1, cfg.predictor_steps + 1), desc="train code predictor", disable=not progress):
        if pos + cfg.predictor_batch > len(g):
            order, pos = torch.randperm(len(g), generator=gen), 0
        idx = order[pos:pos + cfg.predictor_batch].to(g.device)        # the order from the seeded host generator
        pos += cfg.predictor_batch
        model.talker.code_predictor.train()
        ce = _predictor_ce(model, g[idx], codes[idx])
        optimizer.zero_grad()
        ce.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        result.predictor_phase_loss.append(float(ce.detach()))
        if step % cfg.val_every == 0 or step == cfg.predictor_steps:
            held_out = predictor_validation(model, val_g, val_codes)
            _record(result, "predictor", step, val_talker, held_out)
            if float(held_out.mean()) < best:
                best, result.predictor_best_step = float(held_out.mean()), step
                best_state = state_snapshot(model.talker.code_predictor)
    model.talker.code_predictor.load_state_dict(best_state)
