"""Free-running synthesis through the official `generate`, with our inner loop switched in.

The talker samples c0 with its own settings (the global RNG, seeded for the call and restored after:
`helpers.adapter.global_rng`); the inner loop samples c1..c15 from its own generator (AR or speculative); frames are
fed back until the codec EOS or `max_frames`. The same `seed` gives the same codes for the AR and the speculative
inner loop. The model is left as it was given (its generation config included).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from helpers.method.decoding import Decoder
from helpers.method.stack import FusedCore
from helpers.adapter.global_rng import global_rng
from helpers.adapter.inner_loop import InnerLoop


@dataclass
class Synthesis:
    """codes [T, 16]; g [T, H_talker] (the talker state that produced each frame); calls per frame."""

    codes: torch.Tensor
    g: torch.Tensor
    calls: list[int]

    @property
    def tokens_per_step(self) -> float:
        return (self.codes.shape[1] - 1) * len(self.calls) / max(sum(self.calls), 1)     # residual codes per call


@torch.no_grad()
def synthesize(model: nn.Module, input_ids: torch.Tensor, language: str, speaker: str | None,
               decoder: Decoder | str = "ar", seed: int = 0, max_frames: int = 200,
               non_streaming_mode: bool = False, core: FusedCore | None = None, **talker_sampling) -> Synthesis:
    """One utterance. input_ids [1, n + 8] chat-formatted; talker_sampling: top_k, temperature, ... for c0;
    decoder, core: the inner loop (`InnerLoop`: "ar" builds AR `Decoder`s over `core`, default over the talker's own
    code predictor)."""
    with padded(model), global_rng(seed), InnerLoop(model.talker, decoder, seed=seed, core=core) as loop:
        codes, hidden = model.generate(input_ids=[input_ids], languages=[language], speakers=[speaker],
                                       non_streaming_mode=non_streaming_mode, max_new_tokens=max_frames,
                                       **talker_sampling)
    frames = codes[0].shape[0]
    return Synthesis(codes[0], hidden[0], loop.calls[:frames])


@contextmanager
def padded(model: nn.Module):
    """The talker's generation config with a pad token inside the block (the codec EOS, what transformers would pick
    anyway, without its warning; the official `generate` passes no such argument on), as it was after."""
    config = model.talker.generation_config
    before = config.pad_token_id
    if before is None:
        config.pad_token_id = model.config.talker_config.codec_eos_token_id
    try:
        yield
    finally:
        config.pad_token_id = before
