"""The runtime deployments (`helpers.method.runtime_step`, `helpers.method.runtime_graph`): the exported call is the
stack's call (float32 within rounding), the int8 products take each row on its own grid (a row alone is the same row
inside a call of many, bit for bit), and the runtime's speculative codes are its own AR codes, counted on frames."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from drafting import TREES
from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker, random_frame_inputs
from helpers.method.decoding import Decoder, decoder_core
from helpers.method.drafters import make_drafter
from helpers.method.kernels import RUNTIMES
from helpers.method.predictor import CodePredictor
from helpers.method.runtime_graph import activation_grid, int8_columns, per_row_int8
from helpers.method.runtime_step import RuntimePrefill, RuntimeStep
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.method.stack import FusedStep

SPEC = TinyTalkerSpec(hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, vocab_size=32,
                      talker_hidden_size=32, logit_scale=10.0)


@pytest.fixture(scope="module")
def predictor():
    return CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float32))


@pytest.mark.parametrize("tree", [None, "sparse16", "full2"])
def test_the_float32_runtime_call_is_the_stacks_call(predictor, tree):
    """Every output of the exported call (logits, the query's keys/values, the states) equals the torch stack's at
    every root position, to float32 rounding (1e-5 of the output's scale); so does the prefill."""
    runtime = predictor.with_kernel("ort-float32")
    core = decoder_core(runtime)
    tree = TREES[tree] if tree else None
    stack, call = FusedStep(core, tree), RuntimeStep(core, tree)
    for t in (1, 6, 14):
        inputs = stack.example_inputs(t, seed=t)
        for name, want, got in zip(stack.outputs, stack(*inputs), call(*inputs)):
            assert got.shape == want.shape and got.dtype == want.dtype, name
            assert (got - want).abs().max() <= 1e-5 * want.abs().max(), (name, t)
    g = torch.randn(1, SPEC.talker_hidden_size, generator=torch.Generator().manual_seed(1))
    c0 = torch.tensor([5])
    k, v = core.empty_cache(1)
    for want, got in zip(core.prefill(g, c0, k, v, False), RuntimePrefill(core)(g, c0, k, v)):   # the AR frame's
        assert (got - want).abs().max() <= 1e-5 * want.abs().max()


def _product_graph(w: np.ndarray) -> onnx.ModelProto:
    """x [M, K] (M free) times a constant W [K, N], as torch.mm exports it (Gemm)."""
    k, n = w.shape
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"])], "product",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
                              [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("vnni", [True, False])
def test_int8_rows_do_not_depend_on_the_other_rows(vnni):
    """Each row of a product over many rows is the one-row product's bit for bit (a loud row moves no other, a
    silent row stays zero), and it is round(x / s) on the row's own grid times the int8 weight, scaled back."""
    gen = np.random.default_rng(0)
    w = (gen.standard_normal((64, 48)) * 0.05).astype(np.float32)
    model = per_row_int8(_product_graph(w), vnni=vnni)
    assert [n.op_type for n in model.graph.node].count("MatMulInteger") == 1
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = gen.standard_normal((9, 64)).astype(np.float32)
    x[3] *= 1000.0
    x[5] = 0.0
    rows = session.run(None, {"x": x})[0]
    for i in range(9):
        assert np.array_equal(session.run(None, {"x": x[i:i + 1]})[0][0], rows[i]), i
    assert np.array_equal(rows[5], np.zeros(48, np.float32))
    levels, _ = activation_grid(vnni)
    w8, scale = int8_columns(w)
    peak = np.abs(x).max(-1, keepdims=True)
    expected = (np.round(levels * x / np.maximum(peak, 1e-30)) @ w8.astype(np.float64)) * peak / levels * scale
    assert np.allclose(rows, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())


def test_int8_runtime_call_tracks_the_float32_call(predictor):
    """The int8 call (its projections and heads int8, the rest float32) stays within int8 rounding of the float32
    call: logits within 5% of their scale."""
    core = decoder_core(predictor.with_kernel("ort-w8a8"))
    stack, call = FusedStep(core, TREES["sparse16"]), RuntimeStep(core, TREES["sparse16"])
    assert call.ops.count("MatMulInteger") == 4 * SPEC.num_layers + len(call.groups)   # projections and heads
    inputs = stack.example_inputs(3)
    want, got = stack(*inputs)[0], call(*inputs)[0]
    assert (got - want).abs().max() <= 0.05 * want.abs().max()
    assert not torch.equal(got, want)                                 # int8, not the float32 call


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_runtime_speculation_returns_its_ar_codes(predictor, runtime):
    """The runtime's speculative frames against its own AR frames on the same uniforms, counted: drafts are accepted
    (tokens/step over 1.1) and the frames are equal, but for the rare frame where a float32 row rounds by its call's
    shape in the last bit and sampling turns that into another code."""
    deployed = predictor.with_kernel(runtime)
    sampler = SamplerConfig(temperature=0.9)
    spec = Decoder(deployed, sampler, make_drafter("reused", deployed, 3), TREES["sparse16"])
    ar = Decoder(deployed, sampler)
    frames = 100
    g, c0 = random_frame_inputs(SPEC.talker_hidden_size, SPEC.talker_vocab_size, frames,
                                torch.Generator().manual_seed(6), torch.float32)
    u = frame_uniforms(torch.Generator().manual_seed(7), batch=frames)
    results = [(spec.decode_frame(g[j:j + 1], c0[j:j + 1], u[j:j + 1]), ar.decode_frame(g[j:j + 1], c0[j:j + 1],
                                                                                        u[j:j + 1]))
               for j in range(frames)]
    same = sum(torch.equal(a.codes, b.codes) for a, b in results)
    assert same >= 98, same
    assert 15 * frames / sum(a.calls for a, _ in results) > 1.1


def test_a_runtime_follows_new_weights():
    """After the official weights change, a runtime decoder's calls are exported again from the new weights
    (`Decoder.reload`): its frames are the float32 stack's frames with the new weights."""
    predictor = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float32))
    runtime = predictor.with_kernel("ort-float32")
    sampler = SamplerConfig(temperature=0.9)
    decoder = Decoder(runtime, sampler, make_drafter("reused", runtime, 3), TREES["sparse16"])
    g, c0 = random_frame_inputs(SPEC.talker_hidden_size, SPEC.talker_vocab_size, 1, torch.Generator().manual_seed(2),
                                torch.float32)
    u = frame_uniforms(torch.Generator().manual_seed(3), batch=1)
    before = decoder.decode_frame(g, c0, u).codes
    with torch.no_grad():
        for head in predictor.official.lm_head:
            head.weight.mul_(-1.0)                                     # other logits, other codes
    decoder.core.refresh()                                          # lay the changed weights out again
    after = decoder.decode_frame(g, c0, u).codes
    assert torch.equal(after, Decoder(predictor, sampler).decode_frame(g, c0, u).codes)
    assert not torch.equal(before, after)


def test_a_runtime_refuses_what_it_cannot_run(predictor):
    deployed = predictor.with_kernel("ort-w8a8")
    with pytest.raises(ValueError, match="compiled decoders take a predictor with kernel 'dense'"):
        Decoder(deployed, SamplerConfig(), compile_mode="inductor", rounds_per_graph=(14, 14))
    ar = Decoder(deployed, SamplerConfig())
    g, c0 = random_frame_inputs(SPEC.talker_hidden_size, SPEC.talker_vocab_size, 2, torch.Generator().manual_seed(1),
                                torch.float32)
    with pytest.raises(ValueError, match="decode one stream at a time, got batch 2"):
        ar.decode_frame(g, c0, frame_uniforms(torch.Generator().manual_seed(0), batch=2))
    with pytest.raises(ValueError, match="'ort-w8a8' runs a float32 code predictor, this one is bfloat16"):
        CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.bfloat16)).with_kernel("ort-w8a8")
