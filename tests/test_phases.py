"""The phase clock and the round profile: every phase is marked once per step / round, marking the phases from
outside changes no code, and the profile is self-consistent (structure only: no timing is asserted)."""

import itertools
import math

import pytest
import torch

import helpers.measure.phases as clock_module
from conftest import SPECS, frame_inputs
from drafting import TABLE
from helpers.method.calibration import greedy_tree
from helpers.method.predictor import CodePredictor
from helpers.method.decoding import Decoder
from helpers.method.drafters import PositionOffsets
from helpers.measure.profile import format_profile, round_profile
from helpers.measure.phases import AR_PHASES, ROUND_PHASES, PhaseClock, clocked, eager_modules
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.adapter.tiny import build_tiny_talker


@pytest.fixture(scope="module")
def setup():
    spec = SPECS["h96gqa"]
    cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=0, dtype=torch.float32))
    drafter = PositionOffsets(cp, offsets=0.1 * torch.randn(3, spec.hidden_size, generator=torch.Generator().manual_seed(0)))
    g, c0 = frame_inputs(spec, 3, seed=0, dtype=torch.float32)
    return cp, drafter, {n: greedy_tree(TABLE, n) for n in (4, 8)}, g, c0


@pytest.fixture
def ticking(monkeypatch):
    """perf_counter advancing by exactly 1 per reading: each mark books 1 'second', so seconds = marks."""
    ticks = itertools.count()
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: float(next(ticks)))


def test_clock_books_the_time_since_the_previous_mark(ticking):
    clock = PhaseClock()                                  # reads 0
    clock("a")                                            # 1 - 0
    clock("b")
    clock("a")
    assert clock.seconds == {"a": 2.0, "b": 1.0}
    clock.start()
    assert clock.seconds == {}


def test_decoders_mark_every_phase_once_per_step_and_change_nothing(setup, ticking):
    cp, drafter, trees, g, c0 = setup
    sampler = SamplerConfig()
    u = frame_uniforms(torch.Generator().manual_seed(3), batch=1)
    clock = PhaseClock()
    ar_decoder = Decoder(cp, sampler)
    with clocked(clock, *eager_modules(ar_decoder)):
        ar = ar_decoder.decode_frame(g[:1], c0[:1], u)
    assert clock.seconds == {"prefill": 1.0, **{p: 14.0 for p in AR_PHASES}}
    assert torch.equal(ar.codes, Decoder(cp, sampler).decode_frame(g[:1], c0[:1], u).codes)
    dec = Decoder(cp, sampler, drafter, trees[8])
    clock.start()
    with clocked(clock, *eager_modules(dec)):
        spec = dec.decode_frame(g[:1], c0[:1], u)
    rounds = spec.calls - 1
    assert clock.seconds == {"prefill": 1.0, **{p: float(rounds) for p in ROUND_PHASES}}
    clock.start()
    again = dec.decode_frame(g[:1], c0[:1], u)
    assert clock.seconds == {}                            # out of the block, the modules mark nothing
    assert torch.equal(spec.codes, ar.codes) and torch.equal(again.codes, ar.codes) and again.calls == spec.calls
    assert [t for t, _ in spec.drafts] == [t for t, _ in again.drafts]


def test_round_profile_structure(setup):
    cp, drafter, trees, g, c0 = setup
    u = frame_uniforms(torch.Generator().manual_seed(5), batch=g.shape[0])
    prof = round_profile(cp, drafter, trees, g, c0, u, SamplerConfig(), warmup_frames=1)
    ar = prof["ar"]
    assert ar["steps"] == 14 and ar["per_call_ms"] > 0 and ar["prefill_ms"] > 0
    assert all(ar[p] >= 0 for p in AR_PHASES)
    sampler = SamplerConfig()
    for n, r in prof["trees"].items():
        decoder = Decoder(cp, sampler, drafter, trees[n])
        calls = [decoder.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1]).calls for i in range(g.shape[0])]
        assert math.isclose(r["rounds"], sum(calls) / len(calls) - 1)
        for p in ROUND_PHASES + ("per_call_ms",):
            assert math.isclose(r["over_ar"][p], r[p] - ar.get(p, 0.0))
        assert math.isclose(r["ratio"], ar["per_call_ms"] / r["per_call_ms"])
        assert math.isclose(r["ratio_verify_only"], ar["per_call_ms"] / (ar["per_call_ms"] + r["over_ar"]["layers"]))
    text = format_profile(prof)
    assert all(f"N={n}" in text for n in trees) and "verify only" in text
