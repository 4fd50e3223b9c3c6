"""The process-wide settings of a run: set once, where a process of the project starts, and nowhere else.

    process_settings(threads=1)     # a notebook's `setup` (mini backend), `make bench`, a pool worker, the scripts

No constructor or library function of the package changes the process (tests/test_process_state.py checks the
ones that used to): the global RNG is seeded only for a block and restored (`helpers.adapter.global_rng`), a
compile carries its own recompile limit (`helpers.method.compiler`), a build fixes its threads for its own steps
(`helpers.backends.mini.build.fixed_threads`). What remains process-wide is set here:

- torch's intra-op threads (`threads`; None: left as they are). The miniature's matrices are tiny: one thread is
  the fastest and is not several times slower when another process holds a core, and every stage's numbers are
  the same on one thread in any process (the pool's workers run on one thread too, `helpers.experiment.run.pool`).
- dynamo's cap on the compiles of one code object, summed over every `torch.compile` (256 by default): raised to
  `ACCUMULATED_RECOMPILES`, since every compiled Round of a benchmark shares one forward.

Set even earlier, by `import helpers` (environment variables the numerical libraries read when they load):
the numerical pins of `helpers.backends.mini.numerics`.
"""

from __future__ import annotations

import torch
import torch._dynamo

MINI_THREADS = 1
ACCUMULATED_RECOMPILES = 512


def process_settings(threads: int | None = None) -> None:
    """torch on `threads` intra-op threads (None: unchanged) and dynamo's accumulated recompile cap raised."""
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        torch.set_num_threads(threads)
    dynamo = torch._dynamo.config
    dynamo.accumulated_recompile_limit = max(dynamo.accumulated_recompile_limit, ACCUMULATED_RECOMPILES)


def run_threads(backend: str) -> int | None:
    """A run's torch threads by its backend: `MINI_THREADS` for the miniature, the machine's default otherwise."""
    return MINI_THREADS if backend == "mini" else None
