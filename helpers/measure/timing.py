"""The one timing harness: percentiles of repeated calls, and whole frames interleaved across systems.

Both synchronise the device around what they time (CUDA kernels run asynchronously). `interleaved` runs every
system once per frame in a shuffled order (seeded), so a change of load on a shared machine hits all alike.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch


@dataclass
class Percentiles:
    """Milliseconds over `iters` timed calls (after `warmup` untimed ones)."""

    p10: float
    p50: float
    p90: float
    iters: int
    warmup: int

    @classmethod
    def of(cls, seconds: list[float], warmup: int) -> "Percentiles":
        ms = np.asarray(seconds) * 1e3
        p10, p50, p90 = np.percentile(ms, [10, 50, 90])
        return cls(float(p10), float(p50), float(p90), len(ms), warmup)


def device_sync(device: torch.device) -> Callable[[], None]:
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def time_calls(fn: Callable[[], object], device: torch.device | str = "cpu", warmup: int = 20,
               iters: int = 200) -> Percentiles:
    """Percentiles of fn()'s wall time, synchronising the device around every call."""
    device = torch.device(device)
    sync = device_sync(device)
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - start)
    return Percentiles.of(out, warmup)


def interleaved(frames: int, runs_of: Callable[[int], dict[str, Callable[[], object]]], warmup_frames: int = 2,
                seed: int = 0, sync: Callable[[], None] = lambda: None) -> Iterator[tuple[int, dict, dict]]:
    """Frame by frame (after `warmup_frames` untimed ones, cycling over the first frames), every system of
    `runs_of(frame)` once, in an order shuffled by `seed`. Yields (frame, outputs {name: result},
    seconds {name: wall time}) for the timed frames."""
    order = random.Random(seed)
    for i in range(-warmup_frames, frames):
        j = i % frames
        runs = runs_of(j)
        outputs, seconds = {}, {}
        for name in order.sample(list(runs), len(runs)):
            sync()
            start = time.perf_counter()
            outputs[name] = runs[name]()
            sync()
            seconds[name] = time.perf_counter() - start
        if i >= 0:
            yield j, outputs, seconds
