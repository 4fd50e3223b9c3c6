"""The llama.cpp peer (`helpers.measure.peers.llama`): its GGUF reads back as written, llama.cpp's logits of it are
those of the same model (a numpy Qwen3 forward of the same weights; the official code predictor's forward), and
the timing returns its numbers. llama-cpp-python comes from `make peers` (`make test` runs it first)."""

import numpy as np
import pytest
import torch

import gguf

from helpers.measure.peers.llama import (
    code_predictor_shape, code_predictor_weights, in_child, llama_logits, random_weights, tensor_shapes,
    time_llama, write_gguf)

SMALL = dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, mlp=128, vocab=32, eps=1e-6, rope_theta=1e6)
TYPES = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "bf16": gguf.GGMLQuantizationType.BF16}


@pytest.fixture(scope="module")
def small():
    return random_weights(SMALL, seed=3)


@pytest.fixture(scope="module", params=list(TYPES))
def small_gguf(request, small, tmp_path_factory):
    """(dtype, path) of the small random model written in each dtype."""
    path = tmp_path_factory.mktemp("gguf") / f"small-{request.param}.gguf"
    return request.param, write_gguf(path, small, SMALL, request.param)


def stored(weights: dict, dtype: str) -> dict:
    """The weights as the GGUF holds them: matrices through the dtype and back (float64)."""
    qtype = TYPES[dtype]
    return {name: (w if w.ndim == 1 else gguf.quants.dequantize(gguf.quants.quantize(w, qtype), qtype))
            .astype(np.float64) for name, w in weights.items()}


def reference_logits(w: dict, shape: dict, tokens, interleaved: bool = False) -> np.ndarray:
    """A plain Qwen3 forward (HF conventions: rotate-half RoPE, per-head q/k RMSNorm, causal GQA, SwiGLU) of token
    ids [n] at positions 0..n-1 -> logits [n, V]. interleaved: RoPE on (even, odd) pairs instead (the LLaMA
    layout llama.cpp's qwen3 must not be given), the negative control."""
    n, nh, nkv, d, eps = len(tokens), shape["heads"], shape["kv_heads"], shape["head_dim"], shape["eps"]
    angle = np.arange(n)[:, None, None] * shape["rope_theta"] ** (-np.arange(0, d, 2) / d)    # [n, 1, d/2]
    cos, sin = np.cos(angle), np.sin(angle)

    def norm(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    def rope(x):                                                          # [n, heads, d]
        a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :d // 2], x[..., d // 2:])
        a, b = a * cos - b * sin, b * cos + a * sin
        return np.stack((a, b), -1).reshape(x.shape) if interleaved else np.concatenate((a, b), -1)

    x = w["token_embd"][np.asarray(tokens)]                               # [n, H]
    causal = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(shape["layers"]):
        p = {k: w[f"blk.{i}.{k}"] for k in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm",
                                             "attn_k_norm", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                                             "ffn_down")}
        a = norm(x, p["attn_norm"])
        q = rope(norm((a @ p["attn_q"].T).reshape(n, nh, d), p["attn_q_norm"]))
        k = rope(norm((a @ p["attn_k"].T).reshape(n, nkv, d), p["attn_k_norm"])).repeat(nh // nkv, 1)
        v = (a @ p["attn_v"].T).reshape(n, nkv, d).repeat(nh // nkv, 1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d) + causal
        s = np.exp(s - s.max(-1, keepdims=True))
        o = np.einsum("hqk,khd->qhd", s / s.sum(-1, keepdims=True), v).reshape(n, nh * d)
        x = x + o @ p["attn_output"].T
        m = norm(x, p["ffn_norm"])
        g = m @ p["ffn_gate"].T
        x = x + (g / (1 + np.exp(-g)) * (m @ p["ffn_up"].T)) @ p["ffn_down"].T
    return norm(x, w["output_norm"]) @ w["output"].T


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| over the logits' spread (std of want)."""
    return float(np.abs(got - want).max() / want.std())


# tolerance on relative_error: llama.cpp also rounds the activations to Q8_0 (BF16) for its matrix products, which
# gives ~0.03-0.06 (~0.012) at the small shape; Q/K in the wrong layout gives ~1
TOLERANCE = {"q8_0": 0.12, "bf16": 0.04}


def test_gguf_reads_back(small_gguf, small):
    dtype, path = small_gguf
    reader = gguf.GGUFReader(path)
    tensors = {t.name.removesuffix(".weight"): t for t in reader.tensors}
    assert set(tensors) == set(tensor_shapes(SMALL))
    for name, t in tensors.items():
        want = gguf.GGMLQuantizationType.F32 if small[name].ndim == 1 else TYPES[dtype]
        assert t.tensor_type == want, name
        assert tuple(int(n) for n in t.shape) == small[name].shape[::-1], name      # GGUF dims: innermost first
    field = reader.fields["general.architecture"]
    assert bytes(field.parts[field.data[0]]).decode() == "qwen3"
    field = reader.fields["tokenizer.ggml.model"]
    assert bytes(field.parts[field.data[0]]).decode() == "none"
    assert not list(path.parent.glob(".*.tmp"))


def test_llama_logits_are_the_model(small_gguf, small):
    """Two calls (8 tokens, then 5 over their cache): llama.cpp agrees with the reference forward of the weights
    the GGUF holds; the reference with Q/K in the LLaMA (interleaved) layout does not."""
    dtype, path = small_gguf
    tokens = np.random.default_rng(0).integers(0, SMALL["vocab"], 13)
    got = llama_logits(path, tokens, split=8)
    weights = stored(small, dtype)
    want = reference_logits(weights, SMALL, tokens)
    assert got.shape == (13, SMALL["vocab"])
    assert relative_error(got, want) < TOLERANCE[dtype]
    assert relative_error(got, reference_logits(weights, SMALL, tokens, interleaved=True)) > 0.5


def test_code_predictor_gguf_is_the_official_model(tiny, tmp_path):
    """The GGUF of a tiny official code predictor (input table E_1, head 1) gives the logits of the official
    modules' forward of the same tokens."""
    _, _, predictor = tiny
    shape = code_predictor_shape(predictor)
    path = write_gguf(tmp_path / "cp.gguf", code_predictor_weights(predictor), shape, "q8_0")
    tokens = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3])
    official = predictor.official
    with torch.no_grad():
        embeds = official.small_to_mtp_projection(official.model.codec_embedding[0](tokens))[None]
        hidden = official.model(inputs_embeds=embeds, use_cache=False).last_hidden_state
        want = official.lm_head[0](hidden)[0].double().numpy()
    got = llama_logits(path, tokens.tolist(), split=6)
    assert relative_error(got, want) < TOLERANCE["q8_0"]


def test_time_llama(small_gguf):
    _, path = small_gguf
    out = time_llama(path, threads=1, cached=16, sizes=(1, 5, 9, 17), warmup=2, iters=5)
    assert set(out) == {"ar_step_ms", "q_call_ms", "build"}
    assert out["ar_step_ms"] > 0 and set(out["q_call_ms"]) == {5, 9, 17}
    assert all(ms > 0 for ms in out["q_call_ms"].values())
    assert "llama.cpp" in out["build"] and "CPU" in out["build"]


def test_a_failing_llama_process_is_named_and_the_caller_lives_on(tmp_path):
    """llama.cpp runs in a child process: its failure reaches the caller as an error naming the call, how the child
    ended and what it printed, and the caller's process goes on."""
    with pytest.raises(RuntimeError, match=r"(?s)\(sequence_logits\) exited with 1: .*could not load"):
        llama_logits(tmp_path / "missing.gguf", [1, 2])
    assert in_child("tensor_shapes", SMALL)["output"] == (SMALL["vocab"], SMALL["hidden"])
