"""How a call module runs: the compile modes (see `helpers.method.decoding`).

    none            eager
    inductor        torch.compile's kernels (fused elementwise work), launched from the host
    cuda_graph      the eager kernels captured as one CUDA graph per module (CUDA only)
    inductor_graph  inductor's kernels captured as one CUDA graph per module (CUDA only): the fewest launches

A decoder asks for both halves apart where a graph should replay one compiled module several times (`kernels`
compiles a round once, `capture` captures a loop of k of its calls: `helpers.method.decoding.Decoder`,
rounds_per_graph);
`__call__` does both. A captured module is a `CapturedGraph`, captured at its first call and replayed at every later
one (the one capture: decoders and the call timings).
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
    """A module replayed from one CUDA graph, captured at its first call (the one capture: decoders and the call
    timings). state: the decoder's buffers, passed by identity (the graph reads and writes them in place); other
    arguments are copied into the graph's static inputs at each call; returns the static outputs. The capture runs
    three warm-up calls on a side stream first and restores the state after them, so the first replay starts from
    the state it was given; booked(seconds): told how long the capture took."""

    def __init__(self, fn: nn.Module, state: list[torch.Tensor], booked=None):
        self.fn, self.state, self.booked, self.graph = fn, state, booked, None

    def capture(self, args: tuple) -> None:
        start = time.perf_counter()
        self.static = [a if any(a is s for s in self.state) else a.clone() for a in args]
        saved = [s.clone() for s in self.state]      # warm-up calls write the state: the first replay starts over
        stream = torch.cuda.Stream(device=args[0].device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(3):
                self.fn(*self.static)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.out = self.fn(*self.static)
        for s, before in zip(self.state, saved):
            s.copy_(before)
        if self.booked is not None:
            self.booked(time.perf_counter() - start)

    def __call__(self, *args):
        if self.graph is None:
            self.capture(args)
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
        # limit of this compile's own, not the process's config (helpers.experiment.run.process for the global cap)
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
