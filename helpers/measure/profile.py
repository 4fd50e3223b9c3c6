"""Where a decoding round's time goes: the AR step and the speculative round split into phases, in place.

The decoders' phase methods tell a clock where each phase ends (`helpers.measure.phases`: the phases, the
`PhaseClock` and `clocked`, which marks them from outside the method); the time since the previous mark is booked
to that phase.

`round_profile` decodes real frames with the AR loop and the speculative decoder per tree, interleaved,
and reports per phase the median over frames of its milliseconds per step (AR) or per round (speculative),
so the difference between a round and a step, the cost a round must earn back, reads phase by phase.
"""

from __future__ import annotations

import numpy as np
import torch

from helpers.measure.timing import device_sync, interleaved
from helpers.measure.phases import AR_PHASES, ROUND_PHASES, PhaseClock, clocked, eager_modules
from helpers.method.decoding import frame_decoders
from helpers.method.predictor import CodePredictor
from helpers.method.drafters import Drafter
from helpers.method.sampler import SamplerConfig
from helpers.method.tree import SparseTree


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
    sync = device_sync(predictor.device)
    clock = PhaseClock(sync if predictor.device.type == "cuda" else None)
    ar, decoders = frame_decoders(predictor, drafter, trees, sampler)
    per_frame: dict = {"ar": [], **{n: [] for n in decoders}}

    def timed(decode):
        def run():
            clock.start()
            result = decode()
            return result.calls - 1, dict(clock.seconds)
        return run

    def runs_of(j):
        gi, ci, ui = g[j:j + 1], c0[j:j + 1], u[j:j + 1]
        return {"ar": timed(lambda: ar.decode_frame(gi, ci, ui)),
                **{n: timed(lambda dec=dec: dec.decode_frame(gi, ci, ui)) for n, dec in decoders.items()}}

    modules = eager_modules(ar) + [m for dec in decoders.values() for m in eager_modules(dec)]
    with clocked(clock, *modules):
        for _, out, _ in interleaved(g.shape[0], runs_of, warmup_frames, seed, sync):
            for name, row in out.items():
                per_frame[name].append(row)

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


def profile_rows(profile: dict) -> list[dict]:
    """The profile as table rows, one per loop (the AR step, then a round per N): ms per phase and in all, the
    once-per-frame prefill, and a step / round with its two bounds (free round work: sampling, walk, commit and query cost no more than in an AR step; verify only)."""
    def row(name, r, extra):
        return {"loop": name, **{p: r.get(p, 0.0) for p in ROUND_PHASES}, "total ms": r["per_call_ms"],
                "prefill ms (per frame)": r["prefill_ms"], **extra}
    rows = [row("AR step", profile["ar"], {"AR step / round": 1.0, "free round work": None, "verify only": None})]
    rows += [row(f"round, N = {n}", r, {"AR step / round": r["ratio"], "free round work": r["ratio_free_host"],
                                        "verify only": r["ratio_verify_only"]}) for n, r in profile["trees"].items()]
    return rows


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
    lines.append(f"{'free work':>12} {'':>8}" + "".join(f" {row['ratio_free_host']:8.2f} {'':>6}"
                                                      for row in profile["trees"].values())
                 + "   ... if draft, sample, walk and commit cost what they cost in an AR step")
    lines.append(f"{'verify only':>12} {'':>8}" + "".join(f" {row['ratio_verify_only']:8.2f} {'':>6}"
                                                        for row in profile["trees"].values())
                 + "   ... and if the drafts were free too")
    return "\n".join(lines)
