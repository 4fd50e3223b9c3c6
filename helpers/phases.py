"""Where a decoding round's time goes: the AR step and the speculative round split into phases, in place.

The decoders take an optional clock and tell it where each phase ends (`clock("sample")`); the time since
the previous mark is booked to that phase. Phases of an AR step: layers, heads (the rest of the call:
logits), commit (KV), sample. Of a speculative round: query (pick the stop node's drafts, build the
query), layers, heads (logits and every node's drafts), sample (all q tokens), walk (the tree, on the
host), commit (the accepted path's KV, next root). Per frame, once: prefill (and round 1's drafts).

`round_profile` decodes real frames with the AR loop and the speculative decoder per tree, interleaved,
and reports per phase the median over frames of its milliseconds per step (AR) or per round (speculative),
so the difference between a round and a step, the cost a round must earn back, reads phase by phase.
"""

from __future__ import annotations

import random
import time

import numpy as np
import torch

from .code_predictor import CodePredictor
from .drafters import Drafter
from .sampling import SamplerConfig
from .tree import SparseTree

AR_PHASES = ("layers", "heads", "commit", "sample")
ROUND_PHASES = ("query", "layers", "heads", "sample", "walk", "commit")


def no_clock(phase: str) -> None:
    """The decoders' default clock: books nothing."""


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


@torch.no_grad()
def round_profile(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree], g: torch.Tensor,
                  c0: torch.Tensor, u: torch.Tensor, sampler: SamplerConfig = SamplerConfig(),
                  warmup_frames: int = 2, seed: int = 0) -> dict:
    """Per-phase milliseconds of the AR step and of the speculative round per N, on the same frames.

    g [F, H_talker], c0 [F], u [F, 15]; frames are decoded one at a time, systems in a shuffled order.
    -> {"ar": {"steps", "prefill_ms", "step_ms", phase: ms per step}, "trees": {N: {"rounds", "prefill_ms",
        "round_ms", phase: ms per round, "over_ar": {phase: ms more than the AR step's}}}} (medians over frames;
        step_ms / round_ms: median of the frame's time after the prefill over its steps / rounds)
    """
    from .decoding import SpeculativeDecoder, decode_frame_ar

    sync = (lambda: torch.cuda.synchronize(predictor.device)) if predictor.device.type == "cuda" else None
    clock = PhaseClock(sync)
    decoders = {n: SpeculativeDecoder(predictor, drafter, tree, sampler) for n, tree in trees.items()}
    per_frame: dict = {"ar": [], **{n: [] for n in decoders}}
    order = random.Random(seed)
    frames = g.shape[0]
    for i in range(-warmup_frames, frames):
        j = i % frames
        gi, ci, ui = g[j:j + 1], c0[j:j + 1], u[j:j + 1]
        runs = {"ar": lambda: decode_frame_ar(predictor, gi, ci, sampler, ui, clock),
                **{n: (lambda dec=dec: dec.decode_frame(gi, ci, ui, clock)) for n, dec in decoders.items()}}
        for name in order.sample(list(runs), len(runs)):
            if sync is not None:
                sync()
            clock.start()
            result = runs[name]()
            if i >= 0:
                per_frame[name].append((result.calls - 1, dict(clock.seconds)))

    def summary(rows: list, phases: tuple[str, ...]) -> dict:
        ms = {p: float(np.median([s.get(p, 0.0) / n for n, s in rows])) * 1e3 for p in phases}
        body = float(np.median([(sum(s.values()) - s["prefill"]) / n for n, s in rows])) * 1e3
        return {"prefill_ms": float(np.median([s["prefill"] for _, s in rows])) * 1e3, "per_call_ms": body, **ms}

    ar = {"steps": predictor.num_codes - 1, **summary(per_frame["ar"], AR_PHASES)}
    out = {"ar": ar, "trees": {}}
    a = ar["per_call_ms"]
    for n in decoders:
        row = summary(per_frame[n], ROUND_PHASES)
        row["rounds"] = float(np.mean([r for r, _ in per_frame[n]]))
        over = row["over_ar"] = {p: row[p] - ar.get(p, 0.0) for p in ROUND_PHASES + ("per_call_ms",)}
        # measured speedup / tokens/step is about (AR step) / (round) (plus once-per-frame work): what it is,
        # what it would be with free host work, and with free drafting too (only the verify's growth left)
        row["ratio"] = a / row["per_call_ms"]
        row["ratio_free_host"] = a / (a + over["layers"] + over["heads"])
        row["ratio_verify_only"] = a / (a + over["layers"])
        out["trees"][n] = row
    return out


def format_profile(profile: dict) -> str:
    """The profile as a table: ms per AR step / per round, by phase, and each round's excess over a step."""
    phases = ROUND_PHASES + ("per_call_ms",)
    ar = profile["ar"]
    lines = [f"{'phase':>12} {'AR step':>8}" + "".join(f" {f'N={n}':>8} {'+':>6}" for n in profile["trees"])]
    for p in phases:
        name = "total" if p == "per_call_ms" else p
        line = f"{name:>12} {ar.get(p, 0.0):8.3f}"
        for row in profile["trees"].values():
            line += f" {row[p]:8.3f} {row['over_ar'][p]:+6.3f}"
        lines.append(line)
    lines.append(f"{'prefill':>12} {ar['prefill_ms']:8.3f}" + "".join(
        f" {row['prefill_ms']:8.3f} {row['prefill_ms'] - ar['prefill_ms']:+6.3f}" for row in profile["trees"].values())
                 + "   (once per frame)")
    lines.append(f"{'step/round':>12} {'':>8}" + "".join(f" {row['ratio']:8.2f} {'':>6}" for row in profile["trees"].values())
                 + "   AR step / round (~ measured speedup / tokens/step)")
    lines.append(f"{'free host':>12} {'':>8}" + "".join(f" {row['ratio_free_host']:8.2f} {'':>6}"
                                                      for row in profile["trees"].values())
                 + "   ... if query, sample, walk and commit cost what they cost in an AR step")
    lines.append(f"{'verify only':>12} {'':>8}" + "".join(f" {row['ratio_verify_only']:8.2f} {'':>6}"
                                                        for row in profile["trees"].values())
                 + "   ... and if the drafts were free too")
    return "\n".join(lines)
