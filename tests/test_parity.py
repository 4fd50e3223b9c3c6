"""AR vs speculative codes where they need not be identical: frame comparison and the per-position parity test.
The test must not reject samples of one distribution and must reject a temperature of 1.2 against 0.9."""

import pytest
import torch

from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker, random_frame_inputs
from helpers.method.decoding import Decoder
from helpers.method.parity import code_parity, compare_frames, run_parity
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig, frame_uniforms

SPEC = TinyTalkerSpec(hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=8, vocab_size=32,
                      talker_hidden_size=32, logit_scale=10.0)


def test_frames_are_compared_run_by_run_with_where_they_first_differ():
    a = [torch.arange(48).view(3, 16), torch.zeros(2, 16, dtype=torch.long)]
    b = [a[0].clone(), torch.zeros(3, 16, dtype=torch.long)]          # second pair: b one frame longer
    b[0][1, 5] += 1
    b[0][2, 3] += 1
    b[0][2, 9] += 1
    c = compare_frames(a, b)
    assert (c.frames_compared, c.frames_identical) == (6, 3) and c.identical_fraction == 0.5
    assert c.first_difference == [0, 0, 0, 1, 0, 1] + [0] * 10                 # frame 1 at 5, frame 2 first at 3
    assert c.onset == [0] * 5 + [1] + [0] * 10                                  # the run's first differing frame
    assert compare_frames(a, a).to_dict()["identical_fraction"] == 1.0
    with pytest.raises(ValueError, match="same seeds"):
        compare_frames(a, a[:1])


def _codes(predictor, sampler, seed, n=3000):
    gen = torch.Generator().manual_seed(seed)
    g, c0 = random_frame_inputs(SPEC.talker_hidden_size, SPEC.talker_vocab_size, 1, torch.Generator().manual_seed(0),
                                torch.float64)                       # one frame n times: its own distribution
    g, c0 = g.expand(n, -1), c0.expand(n)
    ar = Decoder(predictor, sampler)
    return torch.cat((c0[:, None], ar.decode_frame(g, c0, frame_uniforms(gen, batch=n)).codes), 1)


def test_parity_holds_for_one_distribution_and_rejects_another_temperature():
    predictor = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float64))
    base = _codes(predictor, SamplerConfig(temperature=0.9), seed=1)
    same = code_parity(base, _codes(predictor, SamplerConfig(temperature=0.9), seed=2))
    assert len(same.p_values) == 16 and not same.rejected, same.p_values
    assert same.p_values[0] == 1.0                                     # c0 is the same input in both samples
    hotter = code_parity(base, _codes(predictor, SamplerConfig(temperature=1.2), seed=3))
    assert hotter.rejected and hotter.p_min_adjusted < 1e-6, hotter.p_values
    assert hotter.to_dict()["samples"] == [3000, 3000]
    with pytest.raises(ValueError, match=r"codes \[n, P\]"):
        code_parity(base, base[:, :3])


def _runs(codes: torch.Tensor, repeat: int = 5, length: int = 4) -> list[torch.Tensor]:
    """Runs of dependent frames: each run holds `length` sampled frames, each repeated `repeat` times in a row."""
    return list(codes.repeat_interleave(repeat, 0).split(repeat * length))


def test_run_parity_corrects_for_dependent_frames_and_still_rejects_another_temperature():
    predictor = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float64))
    base = _runs(_codes(predictor, SamplerConfig(temperature=0.9), seed=1, n=1200))
    same = run_parity(base, _runs(_codes(predictor, SamplerConfig(temperature=0.9), seed=2, n=1200)))
    assert not same.rejected, same.p_values
    assert min(same.design_effect[1:]) > 2.5                        # frames repeated 5 times: about 5
    naive = code_parity(torch.cat(base), torch.cat(_runs(_codes(predictor, SamplerConfig(temperature=0.9), seed=2, n=1200))))
    assert naive.p_min_adjusted < same.p_min_adjusted                 # the uncorrected test overstates the evidence
    hotter = run_parity(base, _runs(_codes(predictor, SamplerConfig(temperature=1.2), seed=3, n=1200)))
    assert hotter.rejected and hotter.to_dict()["samples"] == [6000, 6000] and len(hotter.design_effect) == 16
    with pytest.raises(ValueError, match="non-empty lists"):
        run_parity(base, [])
