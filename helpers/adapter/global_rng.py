"""torch's global RNG, seeded for one block and given back as it was: for the draws that take no generator.

    with global_rng(seed):      # the official classes' weight init, `generate`'s sampling, dropout
        model = Qwen3TTSForConditionalGeneration(config)

Module initialisation and the official `generate` draw from the global RNG and accept no `torch.Generator`. Inside
the block they draw exactly what they would after `torch.manual_seed(seed)`; after it, the CPU's and every
initialised CUDA device's RNG state are the caller's again, so no library function leaves the process seeded.
`global_rng()` (no seed) only keeps the state: for a model whose random init is overwritten by loaded weights.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def global_rng(seed: int | None = None):
    """The global RNG seeded with `seed` (None: left as it is) inside the block, its state restored after."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        if seed is not None:
            torch.random.default_generator.manual_seed(seed)
            for device in devices:
                torch.cuda.default_generators[device].manual_seed(seed)
        yield
