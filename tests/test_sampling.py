"""The shared sampler: same warpers as transformers, inverse-CDF draws, and the official sampler's distribution."""

import pytest
import torch
from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                    TopKLogitsWarper, TopPLogitsWarper)

from conftest import SPECS, frame_inputs
from helpers.method.predictor import CodePredictor
from helpers.method.decoding import Decoder
from helpers.method.sampler import SamplerConfig, frame_uniforms, sample, target_probs
from helpers.adapter.tiny import build_tiny_talker
from helpers.method.parity import two_sample_p


@pytest.mark.parametrize("cfg", [SamplerConfig(), SamplerConfig(top_k=5, temperature=0.5),
                                 SamplerConfig(top_k=20, top_p=0.7, temperature=1.3), SamplerConfig(top_k=1)])
def test_target_probs_equal_transformers_warpers(cfg):
    logits = torch.randn(8, 100, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3
    warpers = LogitsProcessorList([TemperatureLogitsWarper(cfg.temperature), TopKLogitsWarper(cfg.top_k)]
                                  + ([TopPLogitsWarper(cfg.top_p)] if cfg.top_p < 1 else []))
    ref = warpers(None, logits.clone()).softmax(-1)
    assert torch.allclose(target_probs(logits, cfg), ref, atol=1e-12)


def test_inverse_cdf_follows_probs_and_never_picks_zero_mass():
    probs = torch.tensor([0.0, 0.2, 0.0, 0.5, 0.3, 0.0], dtype=torch.float64)
    u = torch.rand(200_000, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    u[:3] = torch.tensor([0.0, 1.0 - 2 ** -53, 0.2])
    tokens = sample(probs.expand(len(u), -1), u)
    counts = torch.bincount(tokens, minlength=6).double() / len(u)
    assert counts[[0, 2, 5]].sum() == 0
    assert torch.allclose(counts, probs, atol=0.005)
    assert tokens[:3].tolist() == [1, 4, 3]


@pytest.mark.parametrize("kwargs,message", [
    (dict(top_k=0), "top_k must be an integer >= 1"),
    (dict(top_k=2.5), "top_k must be an integer >= 1"),
    (dict(temperature=0.0), "temperature must be > 0"),
    (dict(temperature=-1.0), "temperature must be > 0"),
    (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
])
def test_bad_sampler_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplerConfig(**kwargs)


def test_ar_sampler_matches_official_generate_in_distribution():
    spec = SPECS["h64"]
    talker = build_tiny_talker(spec, seed=3, dtype=torch.float64)
    cp = CodePredictor.from_talker(talker)
    n = 4000
    g, c0 = frame_inputs(spec, 1, seed=7)
    g, c0 = g.expand(n, -1), c0.expand(n)
    cfg = SamplerConfig(top_k=5, temperature=0.9)
    torch.manual_seed(11)
    official = cp.official.generate(
        inputs_embeds=torch.cat((g[:, None], talker.get_input_embeddings()(c0)[:, None]), dim=1),
        max_new_tokens=15, do_sample=True, top_k=cfg.top_k, top_p=cfg.top_p, temperature=cfg.temperature,
        return_dict_in_generate=True).sequences.numpy()
    assert official.shape == (n, 15)

    def ours(sampler, seed):
        u = frame_uniforms(torch.Generator().manual_seed(seed), batch=n)
        return Decoder(cp, sampler).decode_frame(g, c0, u).codes.numpy()

    same, wrong = ours(cfg, 1), ours(SamplerConfig(top_k=5, temperature=1.3), 2)
    for cols in ([0], [1], [0, 1]):
        assert two_sample_p(same[:, cols], official[:, cols]) > 1e-3, f"codes {cols} differ from official"
    assert two_sample_p(wrong[:, [0, 1]], official[:, [0, 1]]) < 1e-3, "the test has no power"
