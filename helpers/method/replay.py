"""Replaying the inner loop of a finished synthesis: tokens/step of any drafter and tree, exactly.

Speculative decoding is lossless: with the same seed it emits the AR run's codes, so the talker sees
the same frames and produces the same states g. Decoding each recorded frame again from (g, c0) with
the frame's own uniforms (regenerated from the seed, in order, as `InnerLoop` draws them) therefore
reproduces the model calls a full speculative synthesis would make, without re-running the talker.
The evaluation stage checks this against a full synthesis for the main configuration.
"""

from __future__ import annotations

import torch

from helpers.method.decoding import SpeculativeDecoder
from helpers.method.sampling import frame_uniforms


@torch.no_grad()
def replay_calls(decoder: SpeculativeDecoder, runs: list, seeds: list[int]) -> list[list[int]]:
    """Model calls per frame of each run (a `Synthesis`: codes [T, 16], g [T, H_talker]), decoded again by
    `decoder`; raises if a frame's codes differ."""
    p = decoder.predictor
    out = []
    for run, seed in zip(runs, seeds, strict=True):
        generator = torch.Generator().manual_seed(seed)
        calls = []
        for f in range(run.codes.shape[0]):
            u = frame_uniforms(generator, p.num_codes, batch=1, device=p.device)
            result = decoder.decode_frame(run.g[f:f + 1].to(p.dtype), run.codes[f:f + 1, 0], u)
            if not torch.equal(result.codes[0], run.codes[f, 1:].to(result.codes.device)):
                raise RuntimeError(f"replay of frame {f} (seed {seed}) gave other codes than the recorded run: "
                                   "g or the uniforms do not match the synthesis")
            calls.append(result.calls)
        out.append(calls)
    return out
