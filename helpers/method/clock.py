"""The phase clock the decoders report to: `clock(phase)` marks where a phase of a frame ends.

Phases of an AR step: layers, heads (the rest of the call: logits), commit (KV), sample. Of a speculative
round (`helpers.method.round`): layers, heads (target logits), sample (all q tokens), walk (the tree, on the
device), commit (the accepted path's codes and KV), query (the next round's drafts from the stop node). Per frame,
once: prefill (and round 1's drafts). The decoders take clock=None (nothing booked) or a `PhaseClock`, which books
the seconds since the previous mark to the phase named (`helpers.measure.profile` reads it).
"""

from __future__ import annotations

import time

AR_PHASES = ("layers", "heads", "commit", "sample")
ROUND_PHASES = ("query", "layers", "heads", "sample", "walk", "commit")


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
