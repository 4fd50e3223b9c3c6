"""Training the miniature as the official fine-tuning recipe trains Qwen3-TTS.

Teacher forcing over whole utterances: the talker reads the prompt and the ground-truth frames
(`helpers.adapter.talker_inputs`), its cross-entropy is taken on every frame's `c0` and the final codec EOS;
the code predictor reads `[g_f, E0(c0), ..., E14(c14)]` for every frame f and its cross-entropy is
taken on `c1..c15`. Loss = talker CE + 0.3 x code-predictor CE (the recipe's weighting). Cross-entropy
is computed here from the logits (qwen_tts 0.1.1's own sub-talker loss is shifted by one position).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from helpers.adapter.talker_inputs import Utterance, batch_inputs


@dataclass(frozen=True)
class MiniTrainConfig:
    epochs: int = 10
    lr: float = 2e-3
    batch_size: int = 16
    sub_loss_weight: float = 0.3
    seed: int = 0
    non_streaming_mode: bool = False

    def __post_init__(self):
        for name in ("epochs", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not float(self.lr) > 0 or not float(self.sub_loss_weight) >= 0:
            raise ValueError(f"lr must be > 0 and sub_loss_weight >= 0, got {self.lr!r}, {self.sub_loss_weight!r}")


@dataclass
class MiniTrainResult:
    talker_loss: list[float] = field(default_factory=list)       # per step, mean CE per frame (nats)
    predictor_loss: list[float] = field(default_factory=list)    # per step, mean CE per code position


def utterance_losses(model: nn.Module, batch: list[Utterance], non_streaming: bool = False):
    """Teacher-forced (talker CE per frame, code-predictor CE per code position) over a batch, both means."""
    talker = model.talker
    inputs, mask, starts, labels = batch_inputs(model, batch, non_streaming)
    out = talker(inputs_embeds=inputs, attention_mask=mask, output_hidden_states=True)
    hidden = out.hidden_states[0][-1]                                            # [B, L, H]
    c0_logits, c0_labels, g, codes = [], [], [], []
    for row, (start, y, u) in enumerate(zip(starts, labels, batch)):
        c0_logits.append(out.logits[row, start:start + len(y)])
        c0_labels.append(y)
        g.append(hidden[row, start:start + u.codes.shape[0]])
        codes.append(u.codes)
    talker_ce = F.cross_entropy(torch.cat(c0_logits).float(), torch.cat(c0_labels))
    sub_logits, _ = talker.forward_sub_talker_finetune(torch.cat(codes), torch.cat(g))    # [F, 15, V]
    sub_ce = F.cross_entropy(sub_logits.flatten(0, 1).float(), torch.cat(codes)[:, 1:].flatten())
    return talker_ce, sub_ce


def train_mini(model: nn.Module, data: list[Utterance], cfg: MiniTrainConfig = MiniTrainConfig(),
               progress: bool = True) -> MiniTrainResult:
    """Adam over all of the miniature's weights, `cfg.epochs` passes in a seeded order."""
    if not data:
        raise ValueError("no training utterances")
    gen = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    steps = cfg.epochs * -(-len(data) // cfg.batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=cfg.lr, total_steps=steps, pct_start=0.1)
    result = MiniTrainResult()
    bar = tqdm(total=steps, desc="train miniature", disable=not progress)
    model.train()
    for _ in range(cfg.epochs):
        order = torch.randperm(len(data), generator=gen).tolist()
        for start in range(0, len(data), cfg.batch_size):
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
    model.eval()
    return result


@torch.no_grad()
def validation_losses(model: nn.Module, data: list[Utterance], batch_size: int = 16,
                      non_streaming: bool = False) -> tuple[float, torch.Tensor]:
    """(talker CE per frame, code-predictor CE per code position [15]) on held-out utterances, in nats."""
    talker, totals, frames, c0_sum, c0_n = model.talker, None, 0, 0.0, 0
    model.eval()
    for start in range(0, len(data), batch_size):
        batch = data[start:start + batch_size]
        inputs, mask, starts, labels = batch_inputs(model, batch, non_streaming)
        out = talker(inputs_embeds=inputs, attention_mask=mask, output_hidden_states=True)
        hidden = out.hidden_states[0][-1]
        for row, (s, y, u) in enumerate(zip(starts, labels, batch)):
            c0_sum += float(F.cross_entropy(out.logits[row, s:s + len(y)].float(), y, reduction="sum"))
            c0_n += len(y)
            sub_logits, _ = talker.forward_sub_talker_finetune(u.codes, hidden[row, s:s + u.codes.shape[0]])
            ce = F.cross_entropy(sub_logits.float().transpose(1, 2), u.codes[:, 1:], reduction="none").sum(0)
            totals = ce if totals is None else totals + ce
            frames += u.codes.shape[0]
    return c0_sum / c0_n, totals / frames
