"""Replaying the inner loop of a finished synthesis: tokens/step of any drafter and tree, exactly.

Speculative decoding is lossless: with the same seed it emits the AR run's codes, so the talker sees
the same frames and produces the same states g. Decoding each recorded frame again from (g, c0) with
the frame's own uniforms (regenerated from the seed, in order, as `InnerLoop` draws them) therefore
reproduces the model calls a full speculative synthesis would make, without re-running the talker.
The evaluation stage checks this against a full synthesis for the main configuration.

With a float32 or bf16 inner loop a replayed frame may round to other codes than the recorded one
(`strict=False`): its calls still count (they are what the decoder spent on that frame), and the frame
is counted as mismatched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.method.decoding import SpeculativeDecoder
from helpers.method.sampling import frame_uniforms


@dataclass
class Replay:
    calls: list[list[int]]      # model calls per frame of each run
    mismatched: int             # frames whose replayed codes differ from the recorded ones
    frames: int


@torch.no_grad()
def replay_calls(decoder: SpeculativeDecoder, runs: list, seeds: list[int], strict: bool = True) -> Replay:
    """Model calls per frame of each run (a `Synthesis`: codes [T, 16], g [T, H_talker]), decoded again by
    `decoder`; a frame whose codes differ raises (strict) or is counted."""
    p = decoder.predictor
    calls, mismatched = [], []
    for run, seed in zip(runs, seeds, strict=True):
        generator = torch.Generator().manual_seed(seed)
        per_frame = []
        for f in range(run.codes.shape[0]):
            u = frame_uniforms(generator, p.num_codes, batch=1, device=p.device)
            result = decoder.decode_frame(run.g[f:f + 1].to(p.device, p.dtype), run.codes[f:f + 1, 0].to(p.device), u)
            mismatched.append((result.codes[0] != run.codes[f, 1:].to(p.device)).any())   # on the device, no sync
            per_frame.append(result.calls)
        calls.append(per_frame)
    count = int(torch.stack(mismatched).sum()) if mismatched else 0
    if strict and count:
        raise RuntimeError(f"replay gave other codes than the recorded runs on {count} of {len(mismatched)} frames: "
                           "g or the uniforms do not match the synthesis")
    return Replay(calls, count, len(mismatched))
