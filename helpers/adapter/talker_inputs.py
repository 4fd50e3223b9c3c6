"""The talker's input sequence, built as the official `Qwen3TTSForConditionalGeneration.generate` builds it.

One utterance = a prompt (role tokens, codec control tags, speaker, language, the text in either
streaming or non-streaming layout) followed by one input per frame: the sum of the frame's 16 code
embeddings plus that step's trailing text embedding. The talker's output at the last prompt position
predicts frame 0's `c0`; the output at frame f's input predicts frame f+1's `c0` (or the codec EOS).

`teacher_forced_inputs` lays ground-truth codes into that sequence, so teacher forcing (training the
drafters, training the miniature) sees the hidden states free-running synthesis produces: exactly in float64 with
`sdpa` attention, alone or right-padded in a batch; to float32 rounding with `eager` (qwen_tts takes its softmax in
float32); in bf16 to bf16 rounding (the 16 code embeddings' sum and a batched attention round differently from
one-step decoding). `tests/test_qwen3_attention.py` measures each.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class TalkerPrompt:
    """prefix [1, P, H]: the prompt; trailing [1, n, H]: text added at generation steps 0..n-1; pad [1, 1, H]."""

    prefix: torch.Tensor
    trailing: torch.Tensor
    pad: torch.Tensor

    def step_text(self, frames: int) -> torch.Tensor:
        """Text embedding added at generation steps 0..frames-1: [1, frames, H]."""
        n = self.trailing.shape[1]
        if frames <= n:
            return self.trailing[:, :frames]
        return torch.cat((self.trailing, self.pad.expand(-1, frames - n, -1)), dim=1)


def _language_id(cfg, language: str) -> int | None:
    lang = language.lower()
    if lang == "auto":
        return None
    if lang not in cfg.codec_language_id:
        allowed = ", ".join(["auto"] + sorted(k for k in cfg.codec_language_id if "dialect" not in k))
        raise ValueError(f"unknown language {language!r}; allowed: {allowed}")
    return cfg.codec_language_id[lang]


def _speaker_id(cfg, speaker: str | None) -> int | None:
    if not speaker:
        return None
    if speaker.lower() not in cfg.spk_id:
        raise ValueError(f"unknown speaker {speaker!r}; allowed: {', '.join(sorted(cfg.spk_id))}")
    return cfg.spk_id[speaker.lower()]


def talker_prompt(model: nn.Module, input_ids: torch.Tensor, language: str, speaker: str | None,
                  non_streaming_mode: bool = False) -> TalkerPrompt:
    """The prompt of the official `generate` (custom-voice path, no voice clone, no instruction).

    model: `Qwen3TTSForConditionalGeneration`; input_ids [1, 3 + n + 5]: the chat-formatted text
    (`<|im_start|>assistant\\n` + text + `<|im_end|>\\n<|im_start|>assistant\\n`), n >= 1.
    """
    talker, cfg, tcfg = model.talker, model.config, model.config.talker_config
    if input_ids.dim() != 2 or input_ids.shape[0] != 1 or input_ids.shape[1] < 9:
        raise ValueError(f"expected chat-formatted input_ids [1, 3 + n + 5] with n >= 1, got {tuple(input_ids.shape)}")
    language_id, speaker_id = _language_id(tcfg, language), _speaker_id(tcfg, speaker)
    if (language.lower() in ("chinese", "auto") and speaker_id is not None
            and tcfg.spk_is_dialect[speaker.lower()] is not False):
        language_id = tcfg.codec_language_id[tcfg.spk_is_dialect[speaker.lower()]]
    device = talker.device

    def text(ids) -> torch.Tensor:
        return talker.text_projection(talker.get_text_embeddings()(ids))

    def codec(ids: list[int]) -> torch.Tensor:
        return talker.get_input_embeddings()(torch.tensor([ids], device=device))

    bos, eos, pad = text(torch.tensor([[cfg.tts_bos_token_id, cfg.tts_eos_token_id, cfg.tts_pad_token_id]],
                                      device=device)).chunk(3, dim=1)
    tags = ([tcfg.codec_nothink_id, tcfg.codec_think_bos_id, tcfg.codec_think_eos_id] if language_id is None else
            [tcfg.codec_think_id, tcfg.codec_think_bos_id, language_id, tcfg.codec_think_eos_id])
    codec_prompt = codec(tags + ([] if speaker_id is None else [speaker_id]) + [tcfg.codec_pad_id, tcfg.codec_bos_id])
    control = torch.cat((pad.expand(-1, codec_prompt.shape[1] - 2, -1), bos), dim=1) + codec_prompt[:, :-1]
    prefix = torch.cat((text(input_ids[:, :3]), control), dim=1)
    body = input_ids[:, 3:-5]
    if non_streaming_mode:
        words = torch.cat((text(body), eos), dim=1) + codec([tcfg.codec_pad_id] * (body.shape[1] + 1))
        prefix = torch.cat((prefix, words, pad + codec([tcfg.codec_bos_id])), dim=1)
        trailing = pad
    else:
        prefix = torch.cat((prefix, text(body[:, :1]) + codec_prompt[:, -1:]), dim=1)
        trailing = torch.cat((text(body[:, 1:]), eos), dim=1)
    return TalkerPrompt(prefix, trailing, pad)


def frame_embeddings(talker: nn.Module, codes: torch.Tensor) -> torch.Tensor:
    """Sum of each frame's 16 code embeddings (the talker's input per frame). codes [B, T, 16] -> [B, T, H]."""
    tables = [talker.get_input_embeddings()] + list(talker.code_predictor.get_input_embeddings())
    return sum(table(codes[..., i]) for i, table in enumerate(tables))


def teacher_forced_inputs(model: nn.Module, prompt: TalkerPrompt, codes: torch.Tensor,
                          frames: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Ground-truth frames laid into the talker sequence.

    codes [T, 16] -> inputs_embeds [1, P + T, H] and c0 labels [T + 1] (frames' c0, then codec EOS) for the
    outputs at positions P-1 .. P+T-1 (the output at P-1+f is the talker state g that produced frame f).
    frames: the codes' `frame_embeddings` [1, T, H] if already computed (batched training embeds once).
    """
    talker, tcfg = model.talker, model.config.talker_config
    if codes.dim() != 2 or codes.shape[1] != tcfg.num_code_groups:
        raise ValueError(f"expected codes [T, {tcfg.num_code_groups}], got {tuple(codes.shape)}")
    frames = frame_embeddings(talker, codes[None]) if frames is None else frames     # [1, T, H]
    inputs = torch.cat((prompt.prefix, frames + prompt.step_text(codes.shape[0])), dim=1)
    labels = torch.cat((codes[:, 0], torch.tensor([tcfg.codec_eos_token_id], device=codes.device)))
    return inputs, labels


@dataclass
class Utterance:
    """One training example: chat-formatted text ids [1, n + 8], language, speaker, codes [T, 16]."""

    input_ids: torch.Tensor
    language: str
    speaker: str
    codes: torch.Tensor


def batch_inputs(model: nn.Module, batch: list[Utterance], non_streaming: bool):
    """Right-padded talker inputs [B, L, H], mask [B, L], the position of each g_0, and c0 labels.

    Same sequence as `teacher_forced_inputs`, with the frames of the whole batch embedded in one lookup
    per table (a lookup per utterance makes the embedding backward dominate the step).
    """
    frames = frame_embeddings(model.talker, torch.cat([u.codes for u in batch])[None])[0].split(
        [u.codes.shape[0] for u in batch])
    seqs, starts, labels = [], [], []
    for u, f in zip(batch, frames):
        prompt = talker_prompt(model, u.input_ids, u.language, u.speaker, non_streaming)
        x, y = teacher_forced_inputs(model, prompt, u.codes, frames=f[None])
        seqs.append(x[0])
        starts.append(prompt.prefix.shape[1] - 1)
        labels.append(y)
    length = max(s.shape[0] for s in seqs)
    inputs = torch.stack([F.pad(s, (0, 0, 0, length - s.shape[0])) for s in seqs])
    mask = torch.stack([(torch.arange(length, device=inputs.device) < s.shape[0]).long() for s in seqs])
    return inputs, mask, starts, labels


@torch.no_grad()
def talker_states(model: nn.Module, data: list[Utterance], batch_size: int = 16,
                  non_streaming: bool = False) -> list[torch.Tensor]:
    """Teacher-forced talker states g [T, H] per utterance (the state that produced each frame's c0)."""
    model.eval()
    out = []
    for start in range(0, len(data), batch_size):
        batch = data[start:start + batch_size]
        inputs, mask, starts, _ = batch_inputs(model, batch, non_streaming)
        hidden = model.talker(inputs_embeds=inputs, attention_mask=mask, output_hidden_states=True).hidden_states[0][-1]
        out += [hidden[row, s:s + u.codes.shape[0]] for row, (s, u) in enumerate(zip(starts, batch))]
    return out
