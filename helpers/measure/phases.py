"""The decoders' phases, timed from outside the method: the phase clock, the methods whose ends mark the phases, and
the round up to the end of a phase.

Each phase is a method of the decoders' modules (`helpers.method.round`, `helpers.method.stack.FusedStep`) and ends
when that method returns. An AR step (`ARStep`): layers (`FusedStep.states`), heads (`FusedStep.logits`: the rest
of the call), commit (`ARStep.commit`: KV), sample (`ARStep.draw`). A speculative round (`Round`), in the paper's
order draft, verify, accept, commit: draft (`Round.draft`: the next round's drafts from the stop node), layers and
heads (the verify call), sample (`Round.draw`: all q tokens), walk (`Round.walk`: the tree, on the device), commit
(`Round.commit`: the accepted path's codes and KV). Per frame, once: prefill (`Prefill`, with round 1's drafts).

`clocked(clock, *modules)`: while the block runs, each phase method of the modules tells a `PhaseClock` its phase
when it returns, and the clock books the seconds since the previous mark to it; the modules run their own code,
unchanged (`helpers.measure.profile`). `RoundUpTo(round, phase)`: the round's own phase methods up to the end of one
phase, a partial round compiled and captured as the round is (`helpers.measure.compiled_latency`).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from torch import nn

from helpers.method.decoding import Decoder
from helpers.method.round import ARStep, Prefill, Round
from helpers.method.stack import FusedStep

AR_PHASES = ("layers", "heads", "commit", "sample")
ROUND_PHASES = ("draft", "layers", "heads", "sample", "walk", "commit")
UNTIL = ("verify", "sample", "walk", "commit")   # the partial rounds (`RoundUpTo`): up to the end of each (verify:
                                                 # the verify call, its layers and heads)


class PhaseClock:
    """Seconds per phase since `start()`: `clock(phase)` books the time since the previous mark to `phase`.

    sync: called before each mark (torch.cuda.synchronize on CUDA, so a phase's kernels count in it)."""

    def __init__(self, sync=None):
        self.sync = sync
        self.start()

    def start(self) -> None:
        self.seconds: dict[str, float] = {}
        self.last = time.perf_counter()

    def __call__(self, phase: str) -> None:
        if self.sync is not None:
            self.sync()
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self.last
        self.last = now


def phase_methods(module: nn.Module) -> list[tuple[nn.Module, str, str]]:
    """(object, method, phase) for each phase a module runs: `Prefill`, `ARStep`, `Round`, `FusedStep`."""
    if isinstance(module, Prefill):
        return [(module, "forward", "prefill")]
    if isinstance(module, FusedStep):
        return [(module, "states", "layers"), (module, "logits", "heads")]
    if isinstance(module, ARStep):
        return phase_methods(module.step) + [(module, "commit", "commit"), (module, "draw", "sample")]
    if isinstance(module, Round):
        return phase_methods(module.step) + [(module, "draw", "sample"), (module, "walk", "walk"),
                                             (module, "commit", "commit"), (module, "draft", "draft")]
    raise TypeError(f"no phases known for {type(module).__name__}")


def eager_modules(decoder: Decoder) -> list[nn.Module]:
    """The modules an eager host-loop `Decoder` runs (`Decoder.modules`): its prefill and its AR step or round
    (compile "none", rounds_per_graph None: a compiled module runs no Python method to mark)."""
    if decoder.compile_mode != "none" or decoder.rounds_per_graph is not None:
        raise ValueError(f"phases are timed on the eager host loop (compile 'none', rounds_per_graph None), got "
                         f"compile_mode={decoder.compile_mode!r}, rounds_per_graph={decoder.rounds_per_graph}")
    return [decoder.modules.prefill, decoder.modules.step]


def _marked(method, clock, phase: str):
    def call(*args, **kwargs):
        out = method(*args, **kwargs)
        clock(phase)
        return out
    return call


@contextmanager
def clocked(clock, *modules: nn.Module):
    """While the block runs, each phase method of `modules` (`phase_methods`) calls clock(phase) when it returns."""
    done = []
    try:
        for module in modules:
            for obj, name, phase in phase_methods(module):
                if name in vars(obj):
                    raise ValueError(f"{type(obj).__name__}.{name} is clocked twice")
                setattr(obj, name, _marked(getattr(obj, name), clock, phase))    # the instance's: shadows the class's
                done.append((obj, name))
        yield clock
    finally:
        for obj, name in done:
            delattr(obj, name)


class RoundUpTo(nn.Module):
    """`Round` up to the end of `phase` (one of `UNTIL`): the round's own phases (`Round.phases`), stopped there ->
    what that phase made: logits [1, q, V] (verify), ys [q] (sample), stop [1] (walk), t_new [1] (commit)."""

    def __init__(self, round: Round, phase: str):
        super().__init__()
        if phase not in UNTIL:
            raise ValueError(f"phase {phase!r}; allowed: {', '.join(UNTIL)}")
        self.round, self.phase = round, phase

    def forward(self, query, k, v, t, u, codes):
        for phase, made in self.round.phases(query, k, v, t, u, codes):
            if phase == self.phase:
                return made
