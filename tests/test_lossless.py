"""The heart of the project: speculative decoding returns exactly the AR codes for the same random stream.

float64, 300 frames per case, every tree x drafter on two model shapes, with top-k and temperature
cycling through {1, 5, 50} x {0.5, 0.9, 1.3} so that every pair occurs on each shape. A noisy oracle
drafter (true code at a varying rank, or missing) makes deep and partial acceptances frequent.
"""

import itertools
import random

import pytest
import torch

from conftest import frame_inputs
from drafting import TREES, OracleDrafter, random_drafters
from helpers.method.decoding import Decoder
from helpers.method.sampler import SamplerConfig, frame_uniforms

FRAMES = 300
SAMPLERS = [SamplerConfig(top_k=k, temperature=T) for k, T in itertools.product((1, 5, 50), (0.5, 0.9, 1.3))]
CASES = list(itertools.product(TREES, ("reused", "offsets", "offsets_prenorm", "medusa", "oracle")))


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{t}-{d}" for t, d in CASES])
def test_speculative_equals_ar_sample_for_sample(tiny, case):
    spec, _, cp = tiny
    tree_name, drafter_name = CASES[case]
    sampler = SAMPLERS[case % len(SAMPLERS)]
    if drafter_name == "oracle":
        rnd = random.Random(case)
        drafter = OracleDrafter(cp, rank=lambda t, j: rnd.choice([0, 0, 0, 1, 2, None]), seed=case)
    else:
        drafter = random_drafters(cp, seed=case)[drafter_name]
    decoder = Decoder(cp, sampler, drafter, TREES[tree_name])
    g, c0 = frame_inputs(spec, FRAMES, seed=100 + case)
    u = frame_uniforms(torch.Generator().manual_seed(case), batch=FRAMES)
    ar = Decoder(cp, sampler).decode_frame(g, c0, u).codes                    # batched: the same per row
    calls = 0
    for i in range(FRAMES):
        drafter.codes = ar[i]
        result = decoder.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1])
        assert torch.equal(result.codes[0], ar[i]), f"frame {i}: {result.codes[0].tolist()} != {ar[i].tolist()}"
        assert sum(result.accepted) + result.calls == 15                # every token is accepted or sampled
        calls += result.calls
    if drafter_name == "oracle":
        assert 15 * FRAMES / calls > 1.25, "the oracle should accept often: walk not exercised"


def test_batched_ar_equals_one_frame_at_a_time(tiny):
    spec, _, cp = tiny
    g, c0 = frame_inputs(spec, 20, seed=9)
    u = frame_uniforms(torch.Generator().manual_seed(9), batch=20)
    decoder = Decoder(cp, SamplerConfig())
    batched = decoder.decode_frame(g, c0, u).codes
    single = torch.cat([decoder.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1]).codes for i in range(20)])
    assert torch.equal(batched, single)
