"""How a call module runs: the compile modes (see `helpers.method.decoding`).

    none            eager
    inductor        torch.compile's kernels (fused elementwise work), launched from the host
    cuda_graph      the eager kernels captured as one CUDA graph per module (CUDA only)
    inductor_graph  inductor's kernels captured as one CUDA graph per module (CUDA only): the fewest launches

A decoder asks for both halves apart where a graph should replay one compiled module several times (`kernels`
compiles a round once, `capture` captures a loop of k of its calls, `helpers.method.decoding.FrameSpeculative`);
`__call__` does both. A captured module is a `helpers.method.round.CapturedGraph`, captured at its first call.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from helpers.method.round import CapturedGraph

COMPILE_MODES = ("none", "inductor", "cuda_graph", "inductor_graph")
GRAPH_MODES = ("cuda_graph", "inductor_graph")


def check_compile_mode(mode: str, device: torch.device) -> None:
    """A clear error for an unknown mode or CUDA graphs off CUDA."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile={mode!r} is not allowed; allowed: {', '.join(COMPILE_MODES)}")
    if mode in GRAPH_MODES and torch.device(device).type != "cuda":
        raise ValueError(f"compile={mode!r} needs a CUDA model, this one is on {device}; "
                         f"use 'inductor' or 'none' there")


class CallCompiler:
    """Compiles the modules of one decoder in one mode; cuda_graph modules are captured at the first call."""

    def __init__(self, mode: str, device: torch.device, torch_backend: str | None = None):
        check_compile_mode(mode, device)
        self.mode, self.device, self.torch_backend = mode, torch.device(device), torch_backend
        self.seconds = 0.0                     # compile / capture time booked so far (first calls)

    def __call__(self, module: nn.Module, state: list[torch.Tensor]):
        """The module as this mode runs it: compiled (`kernels`), then captured (`capture`)."""
        return self.capture(self.kernels(module), state)

    def kernels(self, module: nn.Module):
        """The module with inductor's kernels (modes inductor, inductor_graph), else itself."""
        if self.mode not in ("inductor", "inductor_graph"):
            return module
        backend = self.torch_backend or "inductor"
        options = {"cpp_wrapper": True} if backend == "inductor" and self.device.type == "cpu" else None
        # every Round shares one forward code object: dynamo's default limit (8) would refuse the 9th Round; a
        # limit of this compile's own, not the process's config (helpers.experiment.process for the global cap)
        compiled = torch.compile(module, backend=backend, dynamic=False, fullgraph=True, options=options,
                                 recompile_limit=64)
        return compiled if self.mode == "inductor_graph" else self._timed_first(compiled)

    def capture(self, fn, state: list[torch.Tensor]):
        """fn replayed from one CUDA graph captured at its first call (graph modes), else fn itself. state: the
        decoder's buffers, passed by identity (the graph reads and writes them in place)."""
        if self.mode not in GRAPH_MODES:
            return fn
        return CapturedGraph(fn, state, self._book)

    def _book(self, seconds: float) -> None:
        self.seconds += seconds

    def _timed_first(self, fn):
        done = []

        def call(*args, **kwargs):
            if done:
                return fn(*args, **kwargs)
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            self.seconds += time.perf_counter() - start
            done.append(True)
            return out
        return call
