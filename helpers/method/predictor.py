"""The Qwen3-TTS code predictor as one explicit call over a static KV cache: a face over the one stack.

`CodePredictor` wraps the official `Qwen3TTSTalkerCodePredictorModelForConditionalGeneration` (and the talker's
codec embedding, which embeds `c0`) so that a call can take any query: per-token code positions (table and RoPE
position), a mask over the query, and a cache (`helpers.method.stack.KVCache`) passed in and out explicitly. Its
calls are those of the one decoder stack of the project (`stack`: a `helpers.method.stack.FusedCore`, the core the
decoders' verify calls run) over copies of the official weights laid out once: `forward_query` is
`FusedCore.query`, `prefill` is `FusedCore.prefill`, `embed` reads its stacked tables, `final_norm` is its own. The
official modules are never changed, and are copied to another dtype or device only where `from_talker` is asked
to. Teacher forcing (`teacher_forced_hidden`), the ideal drafter (`helpers.method.ceiling`) and the walkthrough
call it at any positions; the tests set it against the official forward and against a reference stack over the
official modules (`tests/oracle.py`).

Conventions (docs/method.md). Code position `i` means the code `c_i` of the frame:
- its input embedding is table `i` (`E0` = talker codec embedding, `Ei` = `codec_embedding[i-1]`);
- it is fed at cache slot `i + 1` (slot 0 holds the talker hidden state `g`), RoPE position = slot;
- it is produced by head `i` (`lm_head[i-1]`) from the hidden state `h_i` at slot `i`.

Numerics: RMSNorm and softmax run in at least float32 (float64 stays float64), so float64 calls are
exact to ~1e-15 whatever the query shape. The official eager path rounds those to float32.
"""

from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn
import torch.nn.functional as F

from helpers.method.kernels import check_kernel
from helpers.method.stack import FusedCore, KVCache, causal_mask


def runs(values: Sequence[int]) -> list[tuple[int, int, int]]:
    """Contiguous runs of equal values: [(start, end, value), ...]."""
    out: list[tuple[int, int, int]] = []
    for i, v in enumerate(values):
        if out and out[-1][2] == v:
            out[-1] = (out[-1][0], i + 1, v)
        else:
            out.append((i, i + 1, v))
    return out


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
        return self.stack.empty_cache(batch)

    # ------------------------------------------------------------------ embeddings and heads
    def embed(self, tokens: torch.Tensor, code_pos: Sequence[int]) -> torch.Tensor:
        """Input embeddings of codes: E0 for c0, else the stack's tables E_1..E_15 (`FusedCore.tables`, as the verify
        call reads them). tokens [B, q], code_pos (len q, host ints) -> [B, q, H_talker]."""
        stack, parts = self.stack, []
        for start, end, i in runs(code_pos):
            part = tokens[:, start:end]
            parts.append(self.c0_embedding(part) if i == 0 else F.embedding(part + (i - 1) * stack.vocab, stack.tables))
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]

    def logits(self, hidden: torch.Tensor, code_pos: Sequence[int]) -> torch.Tensor:
        """Target logits of the codes at `code_pos` from their hidden states. [B, n, H] -> [B, n, V]. The official
        heads' [V, H] layout: the reference the stack's [H, V] copies (`FusedCore.heads`) are tested against (the two
        layouts' products differ in the last bits)."""
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

    def final_norm(self, r: torch.Tensor) -> torch.Tensor:
        """The stack's final RMSNorm: pre-norm residual r [..., H] -> hidden state h [..., H] the heads read."""
        return self.stack.final_norm(r)

    def forward_query(self, cache: KVCache, x: torch.Tensor, query_mask: torch.Tensor,
                      depth: torch.Tensor | None = None, prenorm: bool = False):
        """`FusedCore.query`: the stack on query x [B, q, H_talker] placed after the committed slots, cache unchanged;
        query_mask [q, q] bool (token i sees token j), depth [q]: each token's offset after the cache (tree depth;
        default 0..q-1, a sequence). Returns hidden [B, q, H] (prenorm: before the final norm), k_new, v_new
        [L, B, kv, q, d]."""
        q = x.shape[1]
        if q > self.max_query:
            raise ValueError(f"query of {q} tokens is longer than this predictor's max_query={self.max_query}; "
                             f"build CodePredictor with max_query >= {q}")
        depth = torch.arange(q, device=self.device) if depth is None else depth
        return self.stack.query(cache, x, query_mask, depth, prenorm)

    def prefill(self, cache: KVCache, g: torch.Tensor, c0: torch.Tensor, prenorm: bool = False) -> torch.Tensor:
        """`FusedCore.prefill`, committed: [g, E0(c0)] into an empty cache. g [B, H_talker], c0 [B] -> h_1 [B, H]
        (prenorm: r_1)."""
        if cache.length:
            raise ValueError(f"prefill needs an empty cache, this one holds {cache.length} slots")
        _, k_new, v_new, state = self.stack.prefill(g, c0, cache.k, cache.v, prenorm)
        cache.commit(k_new, v_new)
        return state

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

