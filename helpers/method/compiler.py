"""How a call module runs: the compile modes, torch.compile (inductor) and CUDA-graph capture (see
`helpers.method.decoding`)."""

from __future__ import annotations

import time

import torch
from torch import nn

COMPILE_MODES = ("none", "inductor", "cuda_graph")


def check_compile_mode(mode: str, device: torch.device) -> None:
    """A clear error for an unknown mode or CUDA graphs off CUDA."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile={mode!r} is not allowed; allowed: {', '.join(COMPILE_MODES)}")
    if mode == "cuda_graph" and torch.device(device).type != "cuda":
        raise ValueError(f"compile='cuda_graph' needs a CUDA model, this one is on {device}; "
                         f"use 'inductor' or 'none' there")


class _Graphed:
    """A module replayed from one captured CUDA graph: arguments that are not the decoder's state buffers
    (`state`, passed by identity) are copied into the graph's static inputs; returns the static outputs."""

    def __init__(self, fn: nn.Module, args: tuple, state: list[torch.Tensor]):
        self.static = [a if any(a is s for s in state) else a.clone() for a in args]
        stream = torch.cuda.Stream(device=args[0].device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(3):
                fn(*self.static)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.out = fn(*self.static)

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
        if mode == "inductor":
            # every Round shares one forward code object; dynamo's default limit (8) would fall back to eager
            dynamo = torch._dynamo.config
            dynamo.cache_size_limit = max(dynamo.cache_size_limit, 64)
            dynamo.accumulated_cache_size_limit = max(dynamo.accumulated_cache_size_limit, 512)

    def __call__(self, module: nn.Module, state: list[torch.Tensor]):
        if self.mode == "none":
            return module
        if self.mode == "inductor":
            backend = self.torch_backend or "inductor"
            options = {"cpp_wrapper": True} if backend == "inductor" and self.device.type == "cpu" else None
            compiled = torch.compile(module, backend=backend, dynamic=False, fullgraph=True, options=options)
            return self._timed_first(compiled)
        holder = {}

        def call(*args):
            if "graph" not in holder:
                start = time.perf_counter()
                holder["graph"] = _Graphed(module, args, state)
                self.seconds += time.perf_counter() - start
            return holder["graph"](*args)
        return call

    def _timed_first(self, fn):
        done = []

        def call(*args):
            if done:
                return fn(*args)
            start = time.perf_counter()
            out = fn(*args)
            self.seconds += time.perf_counter() - start
            done.append(True)
            return out
        return call
