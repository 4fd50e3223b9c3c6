"""The deployment kernels (`helpers.method.kernels`): the laid-out weights are the source weights after the kernel's
rounding, the fused calls on them track the dense ones, and a kernel's speculative codes are samples of its own AR
distribution (the parity test, with a hotter control that must reject)."""

import pytest
import torch

from drafting import TREES
from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker, random_frame_inputs
from helpers.method.decoding import Decoder
from helpers.method.drafters import make_drafter, top_candidates
from helpers.method.stack import FusedCore, FusedStep, ViewStep, make_linear
from helpers.method.kernels import KERNELS, RUNTIMES, check_kernel, fits, in_features, int8_per_channel, unsupported
from helpers.method.parity import code_parity
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig, frame_uniforms

SPEC = TinyTalkerSpec(hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=8, vocab_size=32,
                      talker_hidden_size=32, logit_scale=10.0)
DTYPE = {"dense": torch.float32, "prepacked": torch.bfloat16, "w8a16": torch.bfloat16, "w8a8": torch.float32}


def _weight(seed=0, shape=(48, 64)):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 0.05


def effective_weight(linear, kernel: str) -> torch.Tensor:
    """The weight [N, K] a CPU kernel's laid-out linear multiplies by, read back through it (identity rows in, in the
    kernel's dtype): a one-hot row picks one input column exactly, so this is the kernel's rounded copy of W."""
    return linear(torch.eye(in_features(linear), dtype=DTYPE[kernel])).t()


def refused_here(kernel: str, make) -> bool:
    """Where this CPU cannot run `kernel` (`unsupported`: "prepacked" without AVX-512 or AVX-NE-CONVERT), check that
    make() refuses it with the reason, and say so: the caller then has nothing else to check on this machine."""
    reason = unsupported(kernel)
    if reason is None:
        return False
    with pytest.raises(ValueError, match=f"kernel '{kernel}' cannot run here: "):
        make()
    assert "oneDNN" in reason
    return True


def test_prepacked_weights_are_the_bfloat16_source():
    w = _weight().bfloat16()
    if refused_here("prepacked", lambda: make_linear(w, "prepacked")):
        return
    assert torch.equal(effective_weight(make_linear(w, "prepacked"), "prepacked"), w)
    x = torch.randn(1, 5, 64).bfloat16()
    assert torch.equal(make_linear(w, "prepacked")(x), torch.matmul(x, make_linear(w, "dense")))


@pytest.mark.parametrize("kernel", ["w8a16", "w8a8"])
def test_int8_weights_are_the_source_rounded_per_channel(kernel):
    w = _weight(1).to(DTYPE[kernel])                                # the kernel's source weight
    w8, scale = int8_per_channel(w)
    w = w.float()
    assert w8.dtype == torch.int8 and w8.abs().max() == 127 and scale.shape == (48,)
    assert ((w8.float() * scale[:, None] - w).abs() <= scale[:, None] / 2 + 1e-7).all()   # nearest of 255 levels
    eff = effective_weight(make_linear(w.to(DTYPE[kernel]), kernel), kernel).float()
    if kernel == "w8a16":                                          # bfloat16 scales, bfloat16 out
        expected = (w8.float() * scale.bfloat16().float()[:, None]).bfloat16().float()
        assert torch.equal(eff, expected)
    else:
        assert torch.allclose(eff, w8.float() * scale[:, None], rtol=1e-5, atol=1e-7)
    # half a step, plus (w8a16) the bfloat16 scale's and output's rounding: within about one int8 step
    assert ((eff - w).abs() <= scale[:, None] * (0.5 + 127 * 2 ** -9) + w.abs() * 2 ** -8 + 1e-7).all()


def test_a_kernel_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match=r"kernel 'fp8': must be one of \('dense', 'prepacked'"):
        check_kernel("fp8", torch.bfloat16, torch.device("cpu"))
    with pytest.raises(ValueError, match="'prepacked' runs a bfloat16 code predictor, this one is float32"):
        make_linear(_weight(), "prepacked")
    with pytest.raises(ValueError, match="'w8a8' runs a float32 code predictor, this one is bfloat16"):
        check_kernel("w8a8", torch.bfloat16, torch.device("cpu"))
    assert fits("w8a16", 64, 3072) and not fits("w8a16", 64, 40) and fits("w8a8", 40)
    with pytest.raises(ValueError, match="'w8a16' needs an input width that is a multiple of 16, got 40"):
        make_linear(_weight(shape=(48, 40)).bfloat16(), "w8a16")
    with pytest.raises(ValueError, match="'w8a16' is a CPU kernel, the code predictor is on cuda"):
        check_kernel("w8a16", torch.bfloat16, torch.device("cuda"))
    predictor = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float32))
    with pytest.raises(ValueError, match="'prepacked' runs a bfloat16"):
        predictor.with_kernel("prepacked")
    packed = predictor.with_kernel("w8a8")
    assert packed.official is predictor.official and predictor.kernel == "dense"      # shared modules, not copied
    with pytest.raises(ValueError, match="compiled decoders take a predictor with kernel 'dense'"):
        Decoder(packed, SamplerConfig(), compile_mode="inductor", rounds_per_graph=(14, 14))
    step = FusedStep(FusedCore(packed), None)
    with pytest.raises(ValueError, match="kernel 'w8a8' runs in the CPU's eager call"):
        torch.jit.trace(step, step.example_inputs(1))                 # the gathered call (tracing, export, graphs)


@pytest.mark.parametrize("kernel", [k for k in KERNELS if k != "dense" and k not in RUNTIMES])
@pytest.mark.parametrize("drafter_kind", ["reused", "offsets", "medusa", "offsets_prenorm"])
def test_fused_calls_on_a_kernel_track_the_dense_calls(kernel, drafter_kind):
    dtype = DTYPE[kernel]
    dense = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=2, dtype=dtype))
    if refused_here(kernel, lambda: FusedCore(dense.with_kernel(kernel), 3)):
        return
    packed = dense.with_kernel(kernel)
    drafter = make_drafter(drafter_kind, dense, 3)
    if drafter_kind != "reused":
        with torch.no_grad():
            for p in drafter.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3), dtype=p.dtype))
    tree = TREES["sparse16"]
    for t in (1, 6):
        a, b = (ViewStep(FusedCore(p, 3), tree, prenorm=drafter.prenorm) for p in (dense, packed))
        inputs = a.example_inputs(t)
        out_a, out_b = a.call_at(*inputs[:3], t), b.call_at(*inputs[:3], t)
        scale = out_a[0].float().abs().max()
        err = (out_a[0].float() - out_b[0].float()).abs().max() / scale
        assert err < {"prepacked": 1e-2, "w8a16": 0.05, "w8a8": 0.05}[kernel], (t, float(err))
        drafts = [top_candidates(drafter, out[3][0].to(dense.dtype), t + 1, 3, 2) for out in (out_a, out_b)]
        assert drafts[1].shape == (tree.size + 1, 3, 2) and drafts[1].dtype == torch.long
        if kernel == "prepacked":                                  # the same products: drafts agree almost always
            assert (drafts[0] == drafts[1]).float().mean() > 0.9


def test_w8a8_rows_do_not_depend_on_the_other_rows():
    """One activation scale per row: each row of a call over many rows is the one-row call's, bit for bit, and its
    quantisation is the row's own symmetric int8 grid (max|x| / 127)."""
    w = _weight(4, shape=(48, 64))
    linear = make_linear(w, "w8a8")
    x = torch.randn(9, 64, generator=torch.Generator().manual_seed(5))
    x[3] *= 1000.0                                                  # a loud row must not move the quiet ones
    x[5] = 0.0                                                      # a silent row stays finite
    x[7] = (torch.arange(64) % 120 - 60 + 0.5) / 127 * 3.0          # values half-way between grid points: one
    x[7, 0] = 3.0                                                   # rounding whatever the path (its peak 3.0)
    rows = linear(x)
    for i in range(9):
        assert torch.equal(linear(x[i:i + 1])[0], rows[i]), i
    assert torch.equal(rows[5], torch.zeros(48))
    if not linear.reduce_range:                                     # 8 bits where the CPU has VNNI
        w8, scale = int8_per_channel(w)
        peak = x.abs().amax(-1, keepdim=True).clamp_min(1e-30)
        expected = (torch.round(x / peak * 127) @ w8.float().t()) * (peak / 127) * scale
        assert torch.allclose(rows, expected, rtol=1e-5, atol=1e-6 * float(expected.abs().max()))


def test_w8a8_speculation_returns_its_ar_codes():
    """Row-independent products: the speculative codes are the w8a8 AR codes on the same uniforms, frame for frame,
    but for the rare frame where the call's float32 attention rounds a row by its shape in the last bit and int8
    rounding turns that into another code (none of these 200 here; the per-call kernel it replaced gave 153 of 200)."""
    predictor = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float32)).with_kernel("w8a8")
    sampler = SamplerConfig(temperature=0.9)
    decoder = Decoder(predictor, sampler, make_drafter("reused", predictor, 3), TREES["sparse16"])
    g, c0 = random_frame_inputs(SPEC.talker_hidden_size, SPEC.talker_vocab_size, 200,
                                torch.Generator().manual_seed(6), torch.float32)
    u = frame_uniforms(torch.Generator().manual_seed(7), batch=200)
    ar = Decoder(predictor, sampler)
    same = sum(torch.equal(decoder.decode_frame(g[j:j + 1], c0[j:j + 1], u[j:j + 1]).codes,
                           ar.decode_frame(g[j:j + 1], c0[j:j + 1], u[j:j + 1]).codes)
               for j in range(200))
    assert same >= 196, same


def _codes(decode, n, seed):
    g, c0 = random_frame_inputs(SPEC.talker_hidden_size, SPEC.talker_vocab_size, 1, torch.Generator().manual_seed(0),
                                torch.float32)                           # one frame n times: its own distribution
    u = frame_uniforms(torch.Generator().manual_seed(seed), batch=n)
    return torch.cat([decode(g, c0, u[i:i + 1]) for i in range(n)])


@pytest.mark.parametrize("kernel", ["w8a16", "w8a8"])
def test_a_kernels_speculative_codes_are_samples_of_its_ar_codes(kernel):
    """Rounding makes a tree call's logits differ from the one-row call's in the last bits, so frames may differ;
    their distribution must not. Independent uniforms; the control (temperature 1.2 against 0.9) must reject."""
    dtype = DTYPE[kernel]
    predictor = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=dtype)).with_kernel(kernel)
    sampler = SamplerConfig(temperature=0.9)
    decoder = Decoder(predictor, sampler, make_drafter("reused", predictor, 3), TREES["sparse16"])
    n = 1500
    plain = Decoder(predictor, sampler)
    ar = _codes(lambda g, c0, u: plain.decode_frame(g.to(dtype), c0, u).codes, n, seed=1)
    spec = _codes(lambda g, c0, u: decoder.decode_frame(g.to(dtype), c0, u).codes, n, seed=2)
    hot = Decoder(predictor, SamplerConfig(temperature=1.2))
    hotter = _codes(lambda g, c0, u: hot.decode_frame(g.to(dtype), c0, u).codes, n, seed=3)
    same = code_parity(ar, spec)
    assert not same.rejected, same.p_values
    control = code_parity(ar, hotter)
    assert control.rejected and control.p_min_adjusted < 1e-6, control.p_values
