"""How a call module runs: the compile modes (see `helpers.method.decoding`).

    none            eager
    inductor        torch.compile's kernels (fused elementwise work), launched from the host
    cuda_graph      the eager kernels captured as one CUDA graph per module (CUDA only)
    inductor_graph  inductor's kernels captured as one CUDA graph per module (CUDA only): the fewest launches

A decoder asks for both halves apart where a graph should replay one compiled module several times (`kernels`
compiles a round once, `capture` captures a loop of k of its calls, `helpers.method.frame`); `__call__` does both.
"""

from __future__ import annotations

import time

import torch
from torch import nn

COMPILE_MODES = ("none", "inductor", "cuda_graph", "inductor_graph")
GRAPH_MODES = ("cuda_graph", "inductor_graph")


def check_compile_mode(mode: str, device: torch.device) -> None:
    """A clear error for an unknown mode or CUDA graphs off CUDA."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile={mode!r} is not allowed; allowed: {', '.join(COMPILE_MODES)}")
    if mode in GRAPH_MODES and torch.device(device).type != "cuda":
        raise ValueError(f"compile={mode!r} needs a CUDA model, this one is on {device}; "
                         f"use 'inductor' or 'none' there")


class CapturedGraph:
    """A module replayed from one captured CUDA graph (the one capture: decoders and the call timings): arguments
    that are not the decoder's state buffers (`state`, passed by identity) are copied into the graph's static
    inputs; returns the static outputs. Three warm-up calls on a side stream first; the state is restored after
    them, so the first replay starts from the state the capture was given."""

    def __init__(self, fn: nn.Module, args: tuple, state: list[torch.Tensor]):
        self.static = [a if any(a is s for s in state) else a.clone() for a in args]
        saved = [s.clone() for s in state]           # warm-up calls write the state: the first replay starts over
        stream = torch.cuda.Stream(device=args[0].device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(3):
                fn(*self.static)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.out = fn(*self.static)
        for s, before in zip(state, saved):
            s.copy_(before)

    def __call__(self, *args):
        for s, a in zip(self.static, args):
            if s is not a:
                s.copy_(a)
        self.graph.replay()
        return self.out


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
        holder = {}

        def call(*args):
            if "graph" not in holder:
                start = time.perf_counter()
                holder["graph"] = CapturedGraph(fn, args, state)
                self.seconds += time.perf_counter() - start
            return holder["graph"](*args)
        return call

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
