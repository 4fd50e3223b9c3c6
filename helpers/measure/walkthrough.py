"""What the notebooks' walk-through figures decode and count: the sequential calls of the two nested loops
(`loop_calls`, Figure 1's numbers), the tokens/step of a decoder over a few frames (`frames_tokens_per_step`) and one
real round to draw (`example_round`, Figures 2 and 3). The figures themselves: `helpers.report.decoding_figures`.
"""

from __future__ import annotations

import torch

from helpers.method.decoding import Decoder, FrameResult
from helpers.method.round_records import RoundRecord, round_records
from helpers.method.sampler import frame_uniforms


def loop_calls(frames_per_second: float, num_codes: int, tokens_per_step: float) -> dict:
    """Sequential calls of the two loops: per frame and per second of audio, AR and speculative.

    num_codes: residual codes per frame (15); tokens_per_step: codes per inner call with speculation.
    -> {"ar": {"outer", "inner", "total"} per frame and "per_second": {...}, "speculative": the same}."""
    if not tokens_per_step >= 1.0:
        raise ValueError(f"tokens_per_step={tokens_per_step} must be >= 1 (one code per call at least)")
    out = {}
    for name, inner in (("ar", float(num_codes)), ("speculative", num_codes / tokens_per_step)):
        frame = {"outer": 1.0, "inner": inner, "total": 1.0 + inner}
        out[name] = {**frame, "per_second": {k: v * frames_per_second for k, v in frame.items()}}
    out["tokens_per_step"], out["frames_per_second"], out["num_codes"] = tokens_per_step, frames_per_second, num_codes
    return out


@torch.no_grad()
def frames_tokens_per_step(decoder: Decoder, g: torch.Tensor, c0: torch.Tensor, seed: int) -> float:
    """Codes per inner call of `decoder` over frames g [F, H_talker], c0 [F] (uniforms from `seed`): 15 F / calls."""
    p = decoder.predictor
    u = frame_uniforms(torch.Generator().manual_seed(seed), p.num_codes, batch=g.shape[0], device=p.device)
    calls = sum(decoder.decode_frame(g[f:f + 1], c0[f:f + 1], u[f:f + 1]).calls for f in range(g.shape[0]))
    return p.num_codes * g.shape[0] / calls


def example_round(decoder: Decoder, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor,
                  min_accepted: int = 1) -> tuple[int, int, RoundRecord, FrameResult]:
    """The first round, in frame order, that accepted at least `min_accepted` drafts (else frame 0's first round).
    g [F, H_talker], c0 [F], u [F, 15] on the decoder's device. -> (frame, round index, record, the frame's result)"""
    first = None
    for f in range(g.shape[0]):
        result = decoder.decode_frame(g[f:f + 1], c0[f:f + 1], u[f:f + 1])
        for i, record in enumerate(round_records(decoder, result)):
            if record.accepted >= min_accepted:
                return f, i, record, result
            first = first or (f, i, record, result)
    if first is None:
        raise ValueError("no frame had a tree round (give at least one frame)")
    return first
