"""Compiled calls (the rounds of helpers.method.round compiled): the same codes as the eager decoders for the same uniforms.

Every frame runs its last rounds (roots t = 12, 13, 14) on the full tree with the nodes past c15 masked, so each
check covers them. The gathered modules run eagerly (views=False) on both tiny shapes and every fused drafter,
against the CPU's eager decoders (views) at float64 (codes and calls); through torch.compile with the aot_eager backend (dynamo, functionalised
graph, no C++ build) at float64 and float32; one inductor case (the C++ build) on the AR loop.
"""

import pytest
import torch

from conftest import SPECS, frame_inputs
from drafting import TREES, random_drafters
from helpers.adapter.tiny import build_tiny_talker
from helpers.experiment.run.params import ParamsError, RunParams
from helpers.method.decoding import Decoder
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig, frame_uniforms

SAMPLER = SamplerConfig(top_k=5, temperature=1.3)       # peaked, and far from greedy: walks stop anywhere


def frames(spec, n, seed, dtype=torch.float64):
    g, c0 = frame_inputs(spec, n, seed=seed, dtype=dtype)
    return g, c0, frame_uniforms(torch.Generator().manual_seed(seed), batch=n)


def decode_all(decoder, g, c0, u):
    return [decoder.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1]) for i in range(g.shape[0])]


@pytest.mark.parametrize("drafter_name", ["offsets", "offsets_prenorm", "medusa", "reused"])
@pytest.mark.parametrize("tree_name", ["sparse4", "full2", "chain", "sparse16"])
def test_device_round_equals_eager_decoders(tiny, drafter_name, tree_name):
    """The modules uncompiled: codes equal the eager AR loop, calls (drafts too) equal the eager speculative one."""
    spec, _, cp = tiny
    drafter = random_drafters(cp, seed=1)[drafter_name]
    g, c0, u = frames(spec, 40, seed=5)
    ar = Decoder(cp, SAMPLER).decode_frame(g, c0, u).codes
    eager = decode_all(Decoder(cp, SAMPLER, drafter, TREES[tree_name]), g, c0, u)
    ours = decode_all(Decoder(cp, SAMPLER, drafter, TREES[tree_name], views=False), g, c0, u)     # gathered rows
    for i, (e, r) in enumerate(zip(eager, ours)):
        assert torch.equal(r.codes[0], ar[i]), f"frame {i}: {r.codes[0].tolist()} != {ar[i].tolist()}"
        assert r.calls == e.calls and r.accepted == e.accepted, f"frame {i}: rounds differ from the eager decoder"
        assert sum(r.accepted) + r.calls == 15
    assert sum(r.calls for r in ours) < 15 * len(ours) or tree_name == "chain", "no draft ever accepted"
    ar_mod = decode_all(Decoder(cp, SAMPLER, compile_mode="none", rounds_per_graph=(14, 14)), g, c0, u)
    assert all(torch.equal(r.codes[0], ar[i]) and r.calls == 15 for i, r in enumerate(ar_mod))


@pytest.mark.parametrize("dtype,drafter_name", [(torch.float64, "offsets"), (torch.float32, "offsets"),
                                                (torch.float32, "offsets_prenorm")])
def test_compiled_aot_eager_equals_eager(dtype, drafter_name):
    """torch.compile (aot_eager): AR and speculative (N = 4, one full-tree round for every root) == the eager path
    in the same dtype; offsets after and before the final norm."""
    spec = SPECS["h96gqa"]
    cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=1, dtype=dtype))
    drafter = random_drafters(cp, seed=2)[drafter_name]
    g, c0, u = frames(spec, 8, seed=7, dtype=dtype)
    ar = Decoder(cp, SAMPLER).decode_frame(g, c0, u).codes
    compiled_ar = Decoder(cp, SAMPLER, compile_mode="inductor", rounds_per_graph=(14, 14),
                          torch_backend="aot_eager")                                     # the whole frame one graph
    per_step = Decoder(cp, SAMPLER, compile_mode="inductor", torch_backend="aot_eager")
    spec_dec = Decoder(cp, SAMPLER, drafter, TREES["sparse4"], "inductor", torch_backend="aot_eager")
    assert spec_dec.modules.step.index.tree == TREES["sparse4"]          # the full tree at every root, masked past c15
    for name, decoder in (("AR", compiled_ar), ("AR per step", per_step), ("speculative", spec_dec)):
        out = decode_all(decoder, g, c0, u)
        for i, r in enumerate(out):
            assert torch.equal(r.codes[0], ar[i]), f"{name} frame {i}: {r.codes[0].tolist()} != {ar[i].tolist()}"
        assert decoder.compiler.seconds > 0
    assert sum(r.calls for r in decode_all(spec_dec, g, c0, u)) < 15 * g.shape[0]


def test_compiled_inductor_ar_equals_eager():
    """The inductor backend (C++ kernels, C++ wrapper) on the AR loop's step graph, float64: codes equal the eager
    loop (the one-graph frame compiles the same step 14 times over; aot_eager checks it above)."""
    spec = SPECS["h64"]
    cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=1, dtype=torch.float64))
    g, c0, u = frames(spec, 6, seed=11)
    ar = Decoder(cp, SAMPLER).decode_frame(g, c0, u).codes
    out = decode_all(Decoder(cp, SAMPLER, compile_mode="inductor"), g, c0, u)
    assert all(torch.equal(r.codes[0], ar[i]) for i, r in enumerate(out))


def test_compile_parameter_is_validated(tiny):
    _, _, cp = tiny
    with pytest.raises(ValueError, match="compile='jit' is not allowed; allowed: none, inductor, cuda_graph, inductor_graph"):
        Decoder(cp, SAMPLER, compile_mode="jit", rounds_per_graph=(14, 14))
    with pytest.raises(ValueError, match="needs a CUDA model"):
        Decoder(cp, SAMPLER, random_drafters(cp)["offsets"], TREES["sparse4"], "cuda_graph")
    with pytest.raises(ParamsError, match="compile='fast' is not allowed; allowed: none, inductor, cuda_graph, inductor_graph"):
        RunParams(compile="fast")
    assert RunParams().compile == "none"


def test_params_modes_are_the_methods():
    for mode in ("cuda_graph", "inductor_graph"):
        with pytest.raises(ParamsError, match=f"compile='{mode}' needs device cuda"):
            RunParams(compile=mode)
    with pytest.raises(ParamsError, match="compile_tree_sizes"):
        RunParams(compile_tree_sizes=[0])
