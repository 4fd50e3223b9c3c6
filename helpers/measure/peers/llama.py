"""llama.cpp at the code predictor's shape: a Qwen3 GGUF of its weights and the time of one decode call.

- `write_gguf(path, weights, shape, dtype)`: a llama.cpp "qwen3" GGUF (Q8_0 or BF16 matrices, F32 norms, no
  tokenizer: `tokenizer.ggml.model = "none"` with `qwen3.vocab_size` dummy tokens), written atomically.
- `random_weights(shape, seed)`: weights to time without a model; `code_predictor_weights(predictor)` and
  `code_predictor_shape(predictor)`: those of a `helpers.method.predictor.CodePredictor` (its first input table
  and first head: one position of the frame, which is all a timing needs).
- `time_llama(gguf_path, threads)`: p50 of one AR call (1 token after `cached` positions) and of q-row calls
  (q tokens at once, logits for every row, as a verify call needs), each call on the same cache.
- `llama_logits(gguf_path, tokens)`: llama.cpp's logits of a sequence (the tests set them against a reference).

Both run llama.cpp in a child process (`python -m helpers.measure.peers.llama`): it is native code built for this
CPU by `make peers`, and a crash of it (a signal) becomes an error that names the signal instead of ending the
bench or the test process that asked.

The weights dict holds float32 arrays keyed by GGUF tensor names without ".weight", in the Hugging Face layouts
(a projection is [out, in]; gguf writes the dims reversed, as llama.cpp reads them): token_embd [V, H], output
[V, H], output_norm [H], and per layer i "blk.{i}." + attn_norm [H], attn_q [nh d, H], attn_k / attn_v [nkv d, H],
attn_q_norm / attn_k_norm [d], attn_output [H, nh d], ffn_norm [H], ffn_gate / ffn_up [F, H], ffn_down [H, F].
Q and K rows stay in the Hugging Face order: llama.cpp's qwen3 uses NEOX RoPE (rotate-half), as HF does; only
its LLaMA arch wants them permuted.

llama.cpp itself comes from `make peers` (llama-cpp-python built from source with clang, see the Makefile).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# The 0.6B code predictor (Qwen3-TTS-12Hz-0.6B): the shape every peer is timed at. Keys as `write_gguf` reads them.
CODE_PREDICTOR_SHAPE = dict(hidden=1024, layers=5, heads=16, kv_heads=8, head_dim=128, mlp=3072, vocab=2048,
                            eps=1e-6, rope_theta=1e6)

LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm", "attn_output",
                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")


def tensor_shapes(shape: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor's name and HF shape (module docstring) for a shape dict."""
    h, d, f, v = shape["hidden"], shape["head_dim"], shape["mlp"], shape["vocab"]
    q, kv = shape["heads"] * d, shape["kv_heads"] * d
    per_layer = dict(attn_norm=(h,), attn_q=(q, h), attn_k=(kv, h), attn_v=(kv, h), attn_q_norm=(d,),
                     attn_k_norm=(d,), attn_output=(h, q), ffn_norm=(h,), ffn_gate=(f, h), ffn_up=(f, h),
                     ffn_down=(h, f))
    shapes = {"token_embd": (v, h), "output_norm": (h,), "output": (v, h)}
    for i in range(shape["layers"]):
        shapes.update({f"blk.{i}.{name}": s for name, s in per_layer.items()})
    return shapes


def random_weights(shape: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 weights of `shape`: projections N(0, 1/in), embedding N(0, 1), norms 1 + N(0, 0.1^2)
    (not all ones, so a misplaced norm shows)."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, s in tensor_shapes(shape).items():
        if len(s) == 1:
            w = 1.0 + 0.1 * rng.standard_normal(s)
        else:
            w = rng.standard_normal(s) / (1.0 if name == "token_embd" else np.sqrt(s[1]))
        weights[name] = w.astype(np.float32)
    return weights


def code_predictor_shape(predictor) -> dict:
    """The shape dict of a `helpers.method.predictor.CodePredictor`."""
    c = predictor.config
    return dict(hidden=c.hidden_size, layers=c.num_hidden_layers, heads=c.num_attention_heads,
                kv_heads=c.num_key_value_heads, head_dim=predictor.head_dim, mlp=c.intermediate_size,
                vocab=c.vocab_size, eps=c.rms_norm_eps, rope_theta=float(c.rope_theta))


def code_predictor_weights(predictor) -> dict[str, np.ndarray]:
    """The official weights of a `helpers.method.predictor.CodePredictor` as float32 arrays (module docstring):
    token_embd = input table E_1 (`codec_embedding[0]`, through `small_to_mtp_projection` when the talker is
    wider), output = head 1 (`lm_head[0]`)."""
    import torch

    official = predictor.official
    with torch.no_grad():
        table = official.model.codec_embedding[0].weight
        table = official.small_to_mtp_projection(table)            # identity at the 0.6B shape
        weights = {"token_embd": table, "output_norm": official.model.norm.weight,
                   "output": official.lm_head[0].weight}
        for i, layer in enumerate(official.model.layers):
            a, m = layer.self_attn, layer.mlp
            modules = (layer.input_layernorm, a.q_proj, a.k_proj, a.v_proj, a.q_norm, a.k_norm, a.o_proj,
                       layer.post_attention_layernorm, m.gate_proj, m.up_proj, m.down_proj)
            weights.update({f"blk.{i}.{name}": mod.weight for name, mod in zip(LAYER_TENSORS, modules)})
        return {name: w.detach().float().cpu().numpy() for name, w in weights.items()}


def write_gguf(path, weights: dict, shape: dict, dtype: str) -> Path:
    """Write `weights` (module docstring; numpy or torch) as a llama.cpp "qwen3" GGUF at `path`: matrices in
    `dtype` ("q8_0" or "bf16"), norms F32. Written to a temporary name, then renamed. Returns the path."""
    import gguf

    qtype, ftype = {"q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
                    "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16)}[dtype]
    expected = tensor_shapes(shape)
    if set(weights) != set(expected):
        raise ValueError(f"weights do not match the shape: missing {sorted(set(expected) - set(weights))}, "
                         f"extra {sorted(set(weights) - set(expected))}")
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    writer = gguf.GGUFWriter(tmp, "qwen3")
    writer.add_name("qwen3-tts code predictor")
    writer.add_context_length(4096)
    writer.add_embedding_length(shape["hidden"])
    writer.add_block_count(shape["layers"])
    writer.add_feed_forward_length(shape["mlp"])
    writer.add_head_count(shape["heads"])
    writer.add_head_count_kv(shape["kv_heads"])
    writer.add_key_length(shape["head_dim"])
    writer.add_value_length(shape["head_dim"])
    writer.add_layer_norm_rms_eps(shape["eps"])
    writer.add_rope_freq_base(shape["rope_theta"])
    writer.add_vocab_size(shape["vocab"])
    writer.add_tokenizer_model("none")                 # no tokenizer: token ids are codes
    writer.add_file_type(ftype)
    for name, w in weights.items():
        w = w.detach().float().cpu().numpy() if hasattr(w, "detach") else np.asarray(w, dtype=np.float32)
        if w.shape != expected[name]:
            raise ValueError(f"{name}: shape {w.shape}, expected {expected[name]}")
        w = np.ascontiguousarray(w, dtype=np.float32)
        if w.ndim == 1:
            writer.add_tensor(f"{name}.weight", w)
        else:
            writer.add_tensor(f"{name}.weight", gguf.quants.quantize(w, qtype), raw_dtype=qtype)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# ---------------------------------------------------------------------------------------------------- llama.cpp
_QUIET = None          # the no-op log callback, kept alive for as long as llama.cpp may call it


def _llama_cpp():
    """The llama_cpp module, initialised once with its logging silenced."""
    global _QUIET
    try:
        import llama_cpp
    except ImportError as e:
        raise ImportError("llama_cpp (llama-cpp-python) is not installed: run `make peers` to build it "
                          "into the project venv") from e
    if _QUIET is None:
        _QUIET = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
        llama_cpp.llama_log_set(_QUIET, ctypes.c_void_p())
        llama_cpp.llama_backend_init()
    return llama_cpp


class _Engine:
    """One GGUF loaded (no mmap) with one context of one sequence: `decode` a batch of tokens at positions
    start.., read `logits` [n, V] of the last call, `drop` the cache from a position on."""

    def __init__(self, path, threads: int, n_ctx: int = 64, n_batch: int = 32):
        ll = self.ll = _llama_cpp()
        params = ll.llama_model_default_params()
        params.use_mmap = False
        self.model = ll.llama_model_load_from_file(str(path).encode(), params)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        cp = ll.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_batch, n_batch, 1
        cp.n_threads = cp.n_threads_batch = threads
        cp.no_perf = True
        self.ctx = ll.llama_init_from_model(self.model, cp)
        if not self.ctx:
            ll.llama_model_free(self.model)
            raise RuntimeError("llama.cpp could not create a context")
        self.memory = ll.llama_get_memory(self.ctx)
        self.vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self.model))
        self.batch = ll.llama_batch_init(n_batch, 0, 1)
        self.n_batch, self.rows = n_batch, 0

    def fill(self, tokens, start: int, logits: bool = True) -> None:
        """Put `tokens` at positions start.. of sequence 0 in the batch, with logits for every row."""
        if len(tokens) > self.n_batch:
            raise ValueError(f"{len(tokens)} tokens, batch holds {self.n_batch}")
        b = self.batch
        for i, token in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = int(token), start + i, 1, logits
            b.seq_id[i][0] = 0
        b.n_tokens = len(tokens)
        self.rows = len(tokens) if logits else 0

    def run(self) -> None:
        """Decode the filled batch, to the end of the computation."""
        if (rc := self.ll.llama_decode(self.ctx, self.batch)) != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        self.ll.llama_synchronize(self.ctx)

    def decode(self, tokens, start: int, logits: bool = True) -> None:
        self.fill(tokens, start, logits)
        self.run()

    def logits(self) -> np.ndarray:
        """Logits [rows, V] of the last call (a copy)."""
        return np.ctypeslib.as_array(self.ll.llama_get_logits(self.ctx), shape=(self.rows, self.vocab)).copy()

    def drop(self, start: int) -> None:
        """Remove positions >= start from the cache."""
        if not self.ll.llama_memory_seq_rm(self.memory, 0, start, -1):
            raise RuntimeError("llama_memory_seq_rm failed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.ll.llama_batch_free(self.batch)
        self.ll.llama_free(self.ctx)
        self.ll.llama_model_free(self.model)


def llama_build() -> str:
    """What llama.cpp is measured: llama-cpp-python's and llama.cpp's versions, how `make peers` built it (its
    stamp, .venv/.peers: compiler, CMake flags, build time) and llama.cpp's system info (AVX512, AMX_INT8, ...)."""
    ll = _llama_cpp()
    stamp = Path(sys.prefix) / ".peers"
    how = stamp.read_text().strip() if stamp.exists() else "not built by `make peers`"
    info = ll.llama_print_system_info().decode().strip().rstrip("|").strip()
    return f"llama-cpp-python {ll.__version__}, llama.cpp {ll.llama_version().decode()}; {how}; {info}"


def in_child(name: str, *args, **kwargs):
    """`name(*args, **kwargs)` of this module run in a child Python process; its result, or RuntimeError naming how
    the child ended (a signal of llama.cpp's, an exception) with what it printed last."""
    with tempfile.TemporaryDirectory(prefix="llama-") as tmp:
        call, result = Path(tmp) / "call.pkl", Path(tmp) / "result.pkl"
        call.write_bytes(pickle.dumps((name, args, kwargs)))
        done = subprocess.run([sys.executable, "-m", __name__, str(call), str(result)], capture_output=True,
                              text=True)
        if done.returncode != 0:
            how = (f"was killed by {signal.Signals(-done.returncode).name}" if done.returncode < 0
                   else f"exited with {done.returncode}")
            raise RuntimeError(f"llama.cpp's process ({name}) {how}: {(done.stdout + done.stderr)[-2000:]}")
        return pickle.loads(result.read_bytes())


def time_llama(gguf_path, threads: int, cached: int = 16, sizes=(1, 5, 9, 17), warmup: int = 10,
               iters: int = 100) -> dict:
    """`timed_calls` in a child process (module docstring)."""
    return in_child("timed_calls", str(gguf_path), threads, cached, tuple(sizes), warmup, iters)


def llama_logits(gguf_path, tokens, threads: int = 1, split: int | None = None) -> np.ndarray:
    """`sequence_logits` in a child process (module docstring)."""
    return in_child("sequence_logits", str(gguf_path), [int(t) for t in tokens], threads, split)


def timed_calls(gguf_path, threads: int, cached: int = 16, sizes=(1, 5, 9, 17), warmup: int = 10,
                iters: int = 100) -> dict:
    """p50 wall time (ms) of llama.cpp decode calls on `gguf_path` with `threads` threads: q tokens at positions
    cached..cached+q-1 after a cache of `cached` positions, logits for every row; the q new positions are removed
    again after each call, so every call sees the same cache.

    Returns {"ar_step_ms": p50 at q = 1, "q_call_ms": {q: p50} for the other sizes, "build": `llama_build()`}.
    """
    rng = np.random.default_rng(0)
    with _Engine(gguf_path, threads, n_ctx=max(64, cached + max(sizes)), n_batch=max(32, cached, *sizes)) as e:
        e.decode(rng.integers(0, e.vocab, cached), 0, logits=False)
        p50 = {}
        for q in sorted(set(sizes) | {1}):
            e.fill(rng.integers(0, e.vocab, q), cached)
            times = []
            for i in range(warmup + iters):
                t0 = time.perf_counter()
                e.run()
                times.append(time.perf_counter() - t0)
                e.drop(cached)
            p50[q] = 1e3 * statistics.median(times[warmup:])
    return {"ar_step_ms": p50[1], "q_call_ms": {q: p50[q] for q in sizes if q != 1}, "build": llama_build()}


def sequence_logits(gguf_path, tokens, threads: int = 1, split: int | None = None) -> np.ndarray:
    """llama.cpp's logits [n, V] for a sequence of token ids: one call, or two (tokens[:split] then the rest, the
    second over the first's cache) when `split` is given."""
    tokens = list(tokens)
    with _Engine(gguf_path, threads, n_ctx=max(64, len(tokens)), n_batch=max(32, len(tokens))) as e:
        parts = [(tokens, 0)] if split is None else [(tokens[:split], 0), (tokens[split:], split)]
        rows = []
        for part, start in parts:
            e.decode(part, start)
            rows.append(e.logits())
    return np.concatenate(rows)


if __name__ == "__main__":              # the child of `in_child` (argv: call.pkl result.pkl); -m imported helpers first
    name, args, kwargs = pickle.loads(Path(sys.argv[1]).read_bytes())
    Path(sys.argv[2]).write_bytes(pickle.dumps(globals()[name](*args, **kwargs)))
