"""Counting calls: AR is 1.00 tokens/step; an always-right K=3 drafter costs exactly 5 calls per frame."""

import pytest
import torch

from conftest import frame_inputs
from drafting import TREES, OracleDrafter
from helpers.method.decoding import Decoder
from helpers.method.sampler import SamplerConfig, frame_uniforms


def test_ar_is_one_token_per_step(tiny):
    spec, _, cp = tiny
    g, c0 = frame_inputs(spec, 5, seed=0)
    result = Decoder(cp, SamplerConfig()).decode_frame(g, c0, frame_uniforms(torch.Generator(), batch=5))
    assert result.calls == 15 and result.tokens_per_step == 1.0 and result.codes.shape == (5, 15)


@pytest.mark.parametrize("tree", ["chain", "full2", "sparse16"])
def test_always_right_drafter_costs_five_calls(tiny, tree):
    spec, _, cp = tiny
    sampler = SamplerConfig()
    drafter = OracleDrafter(cp, rank=lambda t, j: 0)
    decoder = Decoder(cp, sampler, drafter, TREES[tree])
    g, c0 = frame_inputs(spec, 20, seed=1)
    u = frame_uniforms(torch.Generator().manual_seed(1), batch=20)
    ar = Decoder(cp, sampler).decode_frame(g, c0, u).codes
    for i in range(20):
        drafter.codes = ar[i]
        result = decoder.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1])
        # prefill (c1), then rounds of 3 accepted + 1 sampled: c2-c5, c6-c9, c10-c13, c14-c15
        assert result.calls == 5 and result.tokens_per_step == 3.0
        assert result.accepted == [3, 3, 3, 1]
        assert 1 + sum(a + 1 for a in result.accepted) == 15 and len(result.accepted) + 1 == result.calls


def test_never_right_drafter_degrades_to_ar(tiny):
    spec, _, cp = tiny
    drafter = OracleDrafter(cp, rank=lambda t, j: None)
    decoder = Decoder(cp, SamplerConfig(top_k=1), drafter, TREES["full2"])
    g, c0 = frame_inputs(spec, 1, seed=2)
    u = frame_uniforms(torch.Generator(), batch=1)
    drafter.codes = Decoder(cp, SamplerConfig(top_k=1)).decode_frame(g, c0, u).codes[0]
    result = decoder.decode_frame(g, c0, u)
    assert result.calls == 15 and result.accepted == [0] * 14


def _decode(tiny, rank, frames, seed):
    """Speculative FrameResults of `frames` frames with an oracle drafter that ranks the true code `rank(t, j)`."""
    spec, _, cp = tiny
    drafter = OracleDrafter(cp, rank=rank)
    decoder = Decoder(cp, SamplerConfig(), drafter, TREES["full2"])
    g, c0 = frame_inputs(spec, frames, seed=seed)
    u = frame_uniforms(torch.Generator().manual_seed(seed), batch=frames)
    ar = Decoder(cp, SamplerConfig()).decode_frame(g, c0, u).codes
    results = []
    for i in range(frames):
        drafter.codes = ar[i]
        results.append(decoder.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1]))
    return results


def test_accepted_drafts_and_calls_add_up_to_the_frame(tiny):
    results = _decode(tiny, lambda t, j: [0, 1, None][(t + j) % 3], frames=30, seed=3)
    for r in results:
        assert r.calls == 1 + len(r.accepted)                          # prefill + one call per round
        assert sum(r.accepted) + len(r.accepted) + 1 == 15             # each round commits accepted + 1 codes
        assert r.tokens_per_step == pytest.approx(15 / r.calls)
    assert any(r.accepted and max(r.accepted) > 0 for r in results)


def test_an_always_right_drafter_accepts_every_draft(tiny):
    results = _decode(tiny, lambda t, j: 0, frames=5, seed=4)
    assert all(r.accepted == [3, 3, 3, 1] and r.calls == 5 for r in results)   # c1, then 4 + 4 + 4 + 2 codes
