"""The drop-in switch: our AR or speculative decoder as the talker's inner loop.

The official talker samples `c0`, then calls `talker.code_predictor.generate(inputs_embeds=[g, E0(c0)],
max_new_tokens=15, do_sample, top_k, top_p, temperature, ...)` and reads `.sequences` (c1..c15).
`InnerLoop` replaces exactly that method while it is active and puts the stock one back on exit, so the
official `generate` of either backend runs unchanged around our decoder:

    with InnerLoop(model.talker, decoder, seed=0) as loop:
        codes, hidden = model.generate(...)
    loop.calls    # model calls per frame, in order

The frame's uniforms come from the loop's own generator, so the talker's sampling (global RNG) and our
inner loop never share random draws: AR and speculative runs with the same seeds give the same codes.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from helpers.method.predictor import CodePredictor
from helpers.method.decoding import Decoder
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.method.stack import FusedCore


class InnerLoop:
    """Context manager swapping `talker.code_predictor.generate` for our decoder.

    decoder: a `Decoder` (AR or speculative, any mode: its sampler must be the one the talker asks for, checked at
    every frame), or "ar" for AR `Decoder`s built here, one per sampler the talker asks for, over `core` (a
    `FusedCore` and its predictor; default: the talker's own code predictor, `CodePredictor.from_talker`, its fused
    weight copies built per loop). An eager AR decoder takes the talker's batch at once; the others one row at a time.
    seed: seeds the generator of the per-frame uniforms u [B, 15].
    Records per frame: `calls` (model calls) and `accepted` (drafts accepted per round).
    """

    def __init__(self, talker: nn.Module, decoder: Decoder | str = "ar", seed: int = 0, core: FusedCore | None = None):
        if isinstance(decoder, str) and decoder != "ar":
            raise ValueError(f"decoder must be 'ar' or a Decoder, got {decoder!r}")
        self.talker, self.decoder, self.core = talker, decoder, core
        self.predictor = decoder.predictor if isinstance(decoder, Decoder) else (
            core.predictor if core is not None else CodePredictor.from_talker(talker))
        self.ar: dict[SamplerConfig, Decoder] = {}
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)
        self.calls: list[int] = []
        self.accepted: list[list[int]] = []
        self._stock = None

    def __enter__(self) -> "InnerLoop":
        if self._stock is not None:
            raise RuntimeError("this InnerLoop is already active")
        self._stock = self.talker.code_predictor.generate
        self.talker.code_predictor.generate = self.generate
        return self

    def __exit__(self, *exc) -> None:
        del self.talker.code_predictor.generate              # the instance attribute; the class method returns
        self._stock = None

    def c0_from_embedding(self, e0: torch.Tensor) -> torch.Tensor:
        """The stock call passes E0(c0), not c0: recover c0 by exact row match. e0 [B, H] -> c0 [B]."""
        table = self.predictor.c0_embedding.weight                       # E0, or a copy of it in the inner loop's dtype
        narrow = max((e0.dtype, table.dtype), key=lambda d: torch.finfo(d).eps)     # copies round back exactly
        match = (e0[:, None, :].to(narrow) == table[None].to(narrow)).all(-1)       # [B, V0]
        if not bool((match.sum(-1) == 1).all()):
            raise ValueError("the code predictor's second input is not exactly one row of the talker's codec "
                             "embedding; the inner loop can only follow the official talker (whose E0 rows a backend "
                             "checks distinct at load: helpers.adapter.c0_rows)")
        return match.to(torch.int8).argmax(-1)

    @torch.no_grad()
    def generate(self, inputs_embeds: torch.Tensor, max_new_tokens: int, do_sample: bool = True,
                 top_k: int = 50, top_p: float = 1.0, temperature: float = 0.9, **_) -> SimpleNamespace:
        """Stand-in for the official `code_predictor.generate`: inputs_embeds [B, 2, H] -> .sequences [B, 15]."""
        p = self.predictor
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[1] != 2:
            raise ValueError(f"expected inputs_embeds [B, 2, H] = [g, E0(c0)], got {tuple(inputs_embeds.shape)}")
        if max_new_tokens != p.num_codes:
            raise ValueError(f"the inner loop emits all {p.num_codes} residual codes, asked for {max_new_tokens}")
        if not do_sample:
            raise ValueError("the inner loop samples (subtalker_dosample=True); greedy decoding is not supported")
        sampler = SamplerConfig(int(top_k), float(top_p), float(temperature))
        if self.decoder == "ar" and sampler not in self.ar:
            self.ar[sampler] = Decoder(p, sampler, core=self.core)
        dec = self.ar[sampler] if self.decoder == "ar" else self.decoder
        if dec.sampler != sampler:
            raise ValueError(f"the decoder was built for {dec.sampler}, the talker asked for {sampler}")
        g = inputs_embeds[:, 0].to(p.dtype)
        c0 = self.c0_from_embedding(inputs_embeds[:, 1])
        u = frame_uniforms(self.generator, p.num_codes, batch=g.shape[0], device=p.device)
        if dec.batched:
            codes = dec.decode_frame(g, c0, u).codes                               # batched: 15 calls per row
            self.calls += [p.num_codes] * g.shape[0]
            self.accepted += [[] for _ in range(g.shape[0])]
        else:
            results = [dec.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1]) for i in range(g.shape[0])]
            codes = torch.cat([r.codes for r in results])
            self.calls += [r.calls for r in results]
            self.accepted += [list(r.accepted) for r in results]
        return SimpleNamespace(sequences=codes.to(inputs_embeds.device))

    @property
    def tokens_per_step(self) -> float:
        """15 x frames / calls over everything decoded so far."""
        if not self.calls:
            raise ValueError("no frame decoded yet")
        return self.predictor.num_codes * len(self.calls) / sum(self.calls)
