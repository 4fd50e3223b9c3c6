"""A speculative frame that the host reads once or twice: a fixed number of rounds per captured graph.

A CUDA graph replays a fixed list of kernels; it cannot stop when the frame is done, and the host cannot pick the
next round's pruned tree without reading the root position (a device sync every round, `SpeculativeDecoder`).
Here every round runs the full tree (`Round` masks the nodes past c15, and a round past the frame's end writes no
code), so one module serves every round and k of them are one graph:

    SpeculativeFrame   `Prefill`, then the first k1 rounds (`RoundLoop`)
    RoundLoop          k2 more rounds, for the frames that need them

`FrameSpeculative.decode_frame` replays the first graph, reads (t, rounds) once, and replays the second until t = 15:
one host read for a frame of at most k1 rounds. A round past the frame's end costs a round (masked, not skipped), so
k1 is a trade: about the rounds a typical frame needs (`first_rounds`). The codes are the AR codes for the same
uniforms in every mode, as for `SpeculativeDecoder`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from helpers.method.clock import no_clock
from helpers.method.compiler import CallCompiler
from helpers.method.decoding import FrameResult, FrameState, check_tree, decoder_core, dense_only
from helpers.method.drafters import Drafter
from helpers.method.predictor import CodePredictor
from helpers.method.round import Prefill, Round, check_device_drafter
from helpers.method.sampling import SamplerConfig
from helpers.method.tree import SparseTree


class RoundLoop(nn.Module):
    """`count` rounds of one full-tree `Round`, in place on the frame's buffers.

    forward(query [1, q], t [1], rounds [1], k, v, u [15], codes [15 + 1]) -> status [2] = (t, rounds): the next
    root position (15: the frame is done) and the rounds that did work so far (calls = rounds + 1, the prefill)."""

    def __init__(self, round: nn.Module, count: int, num_codes: int):
        super().__init__()
        self.round, self.count, self.num_codes = round, count, num_codes

    def forward(self, query, t, rounds, k, v, u, codes):
        q, position, done = query, t, rounds
        for _ in range(self.count):
            done = done + (position < self.num_codes).long()
            q, position, _ = self.round(q, k, v, position, u, codes)
        query.copy_(q)
        t.copy_(position)
        rounds.copy_(done)
        return torch.cat((t, rounds))


class SpeculativeFrame(nn.Module):
    """`Prefill` (c1 and round 1's query), then `RoundLoop`. forward(g [1, Ht], c0 [1], query, t, rounds, k, v, u,
    codes) -> status [2] = (t, rounds), as `RoundLoop`."""

    def __init__(self, prefill: Prefill, loop: RoundLoop):
        super().__init__()
        self.prefill, self.loop = prefill, loop

    def forward(self, g, c0, query, t, rounds, k, v, u, codes):
        q, _ = self.prefill(g, c0, k, v, u, codes)
        query.copy_(q)
        t.fill_(1)
        rounds.zero_()
        return self.loop(query, t, rounds, k, v, u, codes)


def first_rounds(tokens_per_step: float, num_codes: int = 15) -> int:
    """Rounds of the first graph for a decoder of this (measured or expected) tokens/step: the rounds an average
    frame needs, 15 / tokens_per_step - 1 (the prefill is a call), rounded up."""
    if not tokens_per_step >= 1.0:
        raise ValueError(f"tokens/step must be at least 1, got {tokens_per_step!r}")
    return max(1, min(num_codes - 1, math.ceil(num_codes / tokens_per_step - 1 - 1e-9)))


class FrameSpeculative:
    """The speculative decoder with the host out of the loop: decode_frame(g [1, H], c0 [1], u [1, 15]) ->
    FrameResult (the AR codes for the same uniforms; `reads`: host reads of the frame).

    first: rounds in the first graph (with the prefill); then: rounds in each further graph. compile: "none",
    "inductor" (the round compiled once, the loops run from the host), "cuda_graph" or "inductor_graph" (each loop
    one CUDA graph over the eager, or inductor's, round). Kernel 'dense', drafters that draft with heads (+ offsets)."""

    def __init__(self, predictor: CodePredictor, drafter: Drafter, tree: SparseTree, sampler: SamplerConfig,
                 compile: str = "cuda_graph", first: int = 6, then: int = 1, torch_backend: str | None = None):
        check_tree(predictor, drafter, tree)
        if tree.size < 1:
            raise ValueError("a speculative frame needs a tree of at least one node")
        n = predictor.num_codes
        for name, value in (("first", first), ("then", then)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= n - 1:
                raise ValueError(f"{name}={value!r} rounds per graph; allowed: an integer in 1..{n - 1}")
        dense_only(predictor)
        check_device_drafter(drafter)
        self.predictor, self.drafter, self.tree, self.sampler = predictor, drafter, tree, sampler
        self.compile, self.first, self.then = compile, first, then
        self.compiler = CallCompiler(compile, predictor.device, torch_backend)
        self.core = decoder_core(predictor, max(tree.max_depth, 1))
        self.state = s = FrameState(predictor)
        device = predictor.device
        self.query = torch.zeros(1, tree.size + 1, dtype=torch.long, device=device)
        self.t = torch.ones(1, dtype=torch.long, device=device)
        self.rounds = torch.zeros(1, dtype=torch.long, device=device)
        buffers = [self.query, self.t, self.rounds] + s.buffers
        self.round = Round.build(self.core, drafter, tree, sampler)
        round = self.compiler.kernels(self.round)                       # compiled once, called by both loops
        prefill = self.compiler.kernels(Prefill(self.core, sampler, self.round.drafts, self.round.index))
        self.open = self.compiler.capture(SpeculativeFrame(prefill, RoundLoop(round, first, n)), buffers)
        self.more = self.compiler.capture(RoundLoop(round, then, n), buffers)

    @property
    def compile_seconds(self) -> float:
        return self.compiler.seconds

    @torch.no_grad()
    def decode_frame(self, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor, clock=no_clock) -> FrameResult:
        p, s, n = self.predictor, self.state, self.predictor.num_codes
        self.core.refresh()
        s.start(p, g, c0, u)
        t, rounds = self.open(g, c0, self.query, self.t, self.rounds, s.k, s.v, s.u, s.codes).tolist()
        reads = 1
        clock("call")
        while t < n:
            t, rounds = self.more(self.query, self.t, self.rounds, s.k, s.v, s.u, s.codes).tolist()
            reads += 1
            clock("call")
        return FrameResult(s.codes[:n].clone()[None], calls=1 + rounds, reads=reads)

