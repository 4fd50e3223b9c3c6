"""The Qwen3-TTS code predictor as one explicit call over a static KV cache.

`CodePredictor` wraps the official `Qwen3TTSTalkerCodePredictorModelForConditionalGeneration` (and the talker's
codec embedding, which embeds `c0`) so that a call can take any query: per-token code positions (table and RoPE
position), an additive mask over `[cache slots, query]`, and a cache passed in and out explicitly. Its calls run the
one decoder stack of the project (`stack`: `helpers.method.stack.FusedCore.layers`, the stack the decoders'
verify calls run) over copies of the official weights laid out once; the official modules are never changed, and
are copied to another dtype or device only where `from_talker` is asked to. Teacher forcing
(`teacher_forced_hidden`), the ideal drafter (`helpers.method.ceiling`) and the walkthrough call it at any
positions; the tests set it against the official forward and against a reference stack over the official modules
(`tests/oracle.py`).

Conventions (docs/method.md). Code position `i` means the code `c_i` of the frame:
- its input embedding is table `i` (`E0` = talker codec embedding, `Ei` = `codec_embedding[i-1]`);
- it is fed at cache slot `i + 1` (slot 0 holds the talker hidden state `g`), RoPE position = slot;
- it is produced by head `i` (`lm_head[i-1]`) from the hidden state `h_i` at slot `i`.

Numerics: RMSNorm and softmax run in at least float32 (float64 stays float64), so float64 calls are
exact to ~1e-15 whatever the query shape. The official eager path rounds those to float32.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn
import torch.nn.functional as F

from helpers.method.kernels import check_kernel
from helpers.method.stack import FusedCore, commit_kv


def runs(values: Sequence[int]) -> list[tuple[int, int, int]]:
    """Contiguous runs of equal values: [(start, end, value), ...]."""
    out: list[tuple[int, int, int]] = []
    for i, v in enumerate(values):
        if out and out[-1][2] == v:
            out[-1] = (out[-1][0], i + 1, v)
        else:
            out.append((i, i + 1, v))
    return out


@dataclass
class KVCache:
    """Committed keys/values of one frame: k, v [layers, B, kv_heads, slots, head_dim]."""

    k: torch.Tensor
    v: torch.Tensor
    length: int = 0

    @property
    def slots(self) -> int:
        return self.k.shape[3]

    def commit(self, k_new: torch.Tensor, v_new: torch.Tensor) -> None:
        """Append the query's entries k_new/v_new [L, B, kv, q, d] at `length`."""
        n = k_new.shape[3]
        if self.length + n > self.slots:
            raise ValueError(f"cannot commit {n} entries: cache holds {self.length} of {self.slots} slots")
        commit_kv(self.k, self.v, torch.arange(self.length, self.length + n, device=self.k.device), k_new, v_new)
        self.length += n


class CodePredictor(nn.Module):
    """One call of the code predictor over a static cache.

    Args:
        code_predictor: the official `Qwen3TTSTalkerCodePredictorModelForConditionalGeneration`.
        c0_embedding: the talker's codec embedding (`talker.get_input_embeddings()`), table `E0`.
        max_query: the longest query a call accepts (tree size N + 1).
        kernel: how the fused calls on it multiply (`helpers.method.kernels.KERNELS`; "dense" the reference,
            the others deployment layouts for the CPU's matrix kernels). `with_kernel` gives the same model with another.
    """

    def __init__(self, code_predictor: nn.Module, c0_embedding: nn.Embedding, max_query: int = 65,
                 kernel: str = "dense"):
        super().__init__()
        config = code_predictor.config
        self.official = code_predictor
        self.c0_embedding = c0_embedding
        self.config = config
        self.num_codes = config.num_code_groups - 1          # c1..c15 on the real model
        self.slots = config.num_code_groups                  # committed inputs: g, c0..c14
        self.vocab_size = config.vocab_size
        self.hidden_size = config.hidden_size
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.max_query = max_query
        check_kernel(kernel, self.dtype, self.device)
        self.kernel = kernel
        self._stack: dict = {}                              # the decoder stack, `stack` (a dict: not a submodule)
        if any(t != "full_attention" for t in config.layer_types) and (
                config.sliding_window or 0) < self.slots + max_query:
            raise ValueError(f"sliding-window layers with window {config.sliding_window} are not supported; "
                             f"a frame needs a window of at least {self.slots + max_query}")

    @classmethod
    def from_talker(cls, talker: nn.Module, max_query: int = 65, dtype: torch.dtype | None = None,
                    device: torch.device | str | None = None) -> "CodePredictor":
        """From an official `Qwen3TTSTalkerForConditionalGeneration`: over its own modules, or, where `dtype` or
        `device` differ from the talker's code predictor, over copies of `talker.code_predictor` and of the codec
        embedding (E0) in that dtype on that device (a float64 inner loop beside a bf16 talker; a CPU float32
        copy for export). The talker itself is never changed."""
        official, e0 = talker.code_predictor, talker.get_input_embeddings()
        weight = official.lm_head[0].weight
        dtype, device = dtype or weight.dtype, torch.device(device or weight.device)
        same_device = device.type == weight.device.type and device.index in (None, weight.device.index)
        if dtype != weight.dtype or not same_device:
            official, e0 = (copy.deepcopy(m).to(device=device, dtype=dtype) for m in (official, e0))
        return cls(official, e0, max_query)

    def with_kernel(self, kernel: str) -> "CodePredictor":
        """The same model (its modules shared, nothing copied) with the fused calls multiplying by `kernel`."""
        return self if kernel == self.kernel else CodePredictor(self.official, self.c0_embedding, self.max_query, kernel)

    # ------------------------------------------------------------------ properties
    @property
    def dtype(self) -> torch.dtype:
        return self.official.lm_head[0].weight.dtype

    @property
    def device(self) -> torch.device:
        return self.official.lm_head[0].weight.device

    @property
    def layers(self) -> nn.ModuleList:
        return self.official.model.layers

    def new_cache(self, batch: int = 1) -> KVCache:
        """An empty cache for `batch` frames (`FusedCore.empty_cache`)."""
        return KVCache(*self.stack.empty_cache(batch))

    # ------------------------------------------------------------------ embeddings and heads
    def embed(self, tokens: torch.Tensor, code_pos: Sequence[int]) -> torch.Tensor:
        """Input embeddings of codes. tokens [B, q], code_pos (len q, host ints) -> [B, q, H_talker]."""
        parts = []
        for start, end, i in runs(code_pos):
            table = self.c0_embedding if i == 0 else self.official.model.codec_embedding[i - 1]
            parts.append(table(tokens[:, start:end]))
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]

    def logits(self, hidden: torch.Tensor, code_pos: Sequence[int]) -> torch.Tensor:
        """Target logits of the codes at `code_pos` from their hidden states. [B, n, H] -> [B, n, V]."""
        parts = [F.linear(hidden[:, s:e], self.official.lm_head[i - 1].weight) for s, e, i in runs(code_pos)]
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]

    def check_codes(self, codes: torch.Tensor, first_pos: int = 1) -> None:
        """Raise if any code [..., n] (code positions first_pos..) lies outside its vocabulary."""
        for j in range(codes.shape[-1]):
            pos = first_pos + j
            vocab = self.c0_embedding.num_embeddings if pos == 0 else self.vocab_size
            col = codes[..., j]
            if col.numel() and (int(col.min()) < 0 or int(col.max()) >= vocab):
                bad = col[(col < 0) | (col >= vocab)][0].item()
                raise ValueError(f"code {bad} at code position {pos} is outside the vocabulary: "
                                 f"allowed 0..{vocab - 1}")

    # ------------------------------------------------------------------ the call
    @property
    def stack(self):
        """The decoder stack every call of this predictor runs: a dense `helpers.method.stack.FusedCore` over
        its weights (copies laid out once), built on first use and refreshed when the official weights change. The
        decoders run the same stack (`FusedCore.layers`), so there is one."""
        if "dense" not in self._stack:
            self._stack["dense"] = FusedCore(self, kernel="dense")
        core = self._stack["dense"]
        core.refresh()
        return core

    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                k_cache: torch.Tensor, v_cache: torch.Tensor, prenorm: bool = False):
        """One call of the decoder stack (`stack.layers`) at any positions.

        x: [B, q, H_talker] input embeddings (or talker hidden state for slot 0)
        positions: [q] RoPE positions; mask: [q, S + q] additive, over (cache slots, query)
        k_cache, v_cache: [L, B, kv, S, d]
        returns hidden [B, q, H] (h, after the final norm; prenorm: r, the last layer's output before it,
        h = final_norm(r)), k_new, v_new [L, B, kv, q, d]
        """
        q = x.shape[1]
        if q > self.max_query:
            raise ValueError(f"query of {q} tokens is longer than this predictor's max_query={self.max_query}; "
                             f"build CodePredictor with max_query >= {q}")
        stack = self.stack
        cos, sin = stack.rope(positions)                                           # [q, d] each
        return stack.layers(x, cos[:, None], sin[:, None], mask, k_cache, v_cache, prenorm)

    def final_norm(self, r: torch.Tensor) -> torch.Tensor:
        """The stack's final RMSNorm: pre-norm residual r [..., H] -> hidden state h [..., H] the heads read."""
        return self.stack.final_norm(r)

    # ------------------------------------------------------------------ host helpers
    def attention_mask(self, cache_length: int, query_mask: torch.Tensor) -> torch.Tensor:
        """Additive mask [q, S + q]: committed slots < cache_length visible, query by `query_mask` [q, q] (bool)."""
        q = query_mask.shape[0]
        visible = torch.zeros(q, self.slots + q, dtype=torch.bool, device=self.device)
        visible[:, :cache_length] = True
        visible[:, self.slots:] = query_mask.to(self.device)
        return torch.zeros(visible.shape, dtype=self.dtype, device=self.device).masked_fill(
            ~visible, self.stack.mask_min)

    def forward_query(self, cache: KVCache, x: torch.Tensor, query_mask: torch.Tensor,
                      depth: torch.Tensor | None = None, prenorm: bool = False):
        """Call on query x [B, q, H_talker] placed after the committed slots; cache unchanged.

        depth [q]: each token's offset after the cache (tree depth; default 0..q-1, a sequence).
        returns hidden [B, q, H] (prenorm: before the final norm), k_new, v_new [L, B, kv, q, d]
        """
        if depth is None:
            depth = torch.arange(x.shape[1], device=self.device)
        positions = cache.length + depth.to(self.device)
        return self(x, positions, self.attention_mask(cache.length, query_mask), cache.k, cache.v, prenorm)

    def prefill(self, cache: KVCache, g: torch.Tensor, c0: torch.Tensor, prenorm: bool = False) -> torch.Tensor:
        """Commit [g, E0(c0)] to an empty cache. g [B, H_talker], c0 [B] -> h_1 [B, H] (prenorm: r_1)."""
        if cache.length:
            raise ValueError(f"prefill needs an empty cache, this one holds {cache.length} slots")
        x = torch.cat((g[:, None].to(self.dtype), self.embed(c0[:, None], [0])), dim=1)
        hidden, k_new, v_new = self.forward_query(cache, x, causal_mask(2, self.device), prenorm=prenorm)
        cache.commit(k_new, v_new)
        return hidden[:, 1]

    @torch.no_grad()
    def teacher_forced_hidden(self, g: torch.Tensor, codes: torch.Tensor, prenorm: bool = False) -> torch.Tensor:
        """Hidden states h_1..h_15 over ground-truth codes, as in the fine-tuning recipe.

        g [B, H_talker], codes [B, 16] (c0..c15) -> h [B, 15, H] (h[:, i-1] produces c_i); prenorm: the pre-norm
        residual r [B, 15, H] instead (h = final_norm(r): one extraction serves both kinds of drafter)
        """
        if codes.shape[-1] != self.num_codes + 1:
            raise ValueError(f"codes must have {self.num_codes + 1} columns (c0..c{self.num_codes}), "
                             f"got {codes.shape[-1]}")
        self.check_codes(codes, first_pos=0)
        x = torch.cat((g[:, None].to(self.dtype), self.embed(codes[:, :-1], range(self.num_codes))), dim=1)
        cache = self.new_cache(g.shape[0])
        hidden, _, _ = self.forward_query(cache, x, causal_mask(self.slots, self.device), prenorm=prenorm)
        return hidden[:, 1:]


def causal_mask(q: int, device=None) -> torch.Tensor:
    """[q, q] bool lower-triangular mask (token i sees 0..i)."""
    return torch.ones(q, q, dtype=torch.bool, device=device).tril()
