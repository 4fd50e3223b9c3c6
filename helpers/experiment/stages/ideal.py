"""The ideal drafter's jobs: its exact marginals (the calibration ceiling) and rank-0 drafts (the diagnostics).

The enumeration (`helpers.method.ceiling`) runs in IDEAL_DTYPE on blocks of IDEAL_BLOCK frames, the same blocks
for any number of workers (`helpers.experiment.run.pool`), on a copy of the code predictor made once per process.
"""

from __future__ import annotations

import torch

from helpers.experiment.run.backend_factory import backend, predictor_in, sampler
from helpers.experiment.run.params import RunParams
from helpers.experiment.stages.stage_cache import memo
from helpers.method.ceiling import ceiling_sums, ideal_drafts
from helpers.method.predictor import CodePredictor

IDEAL = dict(width=32, beam=1024)       # the ideal drafter's enumeration: codes per path and level, paths kept
IDEAL_BLOCK = 4                         # frames per ideal-drafter job
IDEAL_DTYPE = torch.float32             # the enumeration's dtype, whatever the run's: a diagnostic (a lower bound
                                        # whose slack is the uncovered mass, not rounding), 2.3x faster than float64
                                        # on the miniature's CPU and equal to it to 7 significant digits (measured);
                                        # bf16 would not be


def ideal_predictor(P: RunParams) -> CodePredictor:
    """The code predictor in IDEAL_DTYPE on the model's device, for the ideal drafter (`predictor_in`, once per
    process)."""
    b, kept = backend(P), memo("ideal")
    if kept.get("backend") is not b:
        kept.update(backend=b, predictor=predictor_in(P, IDEAL_DTYPE))
    return kept["predictor"]


def frame_blocks(g: torch.Tensor, codes: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(g [F, H_talker], codes [F, 16]) in blocks of IDEAL_BLOCK frames: the same blocks for any number of workers."""
    return [(g[i:i + IDEAL_BLOCK], codes[i:i + IDEAL_BLOCK]) for i in range(0, len(codes), IDEAL_BLOCK)]


def ceiling_job(P: RunParams, block: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """`ceiling_sums` of the ideal drafter on one block of calibration frames."""
    return ceiling_sums(ideal_predictor(P), *block, sampler(P), depth=P.depth, m=P.acceptance_width, **IDEAL)


def ideal_job(P: RunParams, block: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The ideal drafter's rank-0 drafts (and covered mass) on one block of validation frames (`ideal_drafts`)."""
    return ideal_drafts(ideal_predictor(P), *block, sampler(P), P.depth, **IDEAL)
