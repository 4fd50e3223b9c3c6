"""Where a speculative frame's time goes when its rounds run in few graphs (`helpers.method.decoding.Decoder`,
rounds_per_graph). Such a frame is: the host's own work (input checks, uniforms, the codes' copy), the first graph
(prefill + k1 rounds) up to its read, then (reads - 1) more graphs (k2 rounds each) up to theirs. Rounds past the
frame's end are masked, not skipped, so they cost what a round costs. `frame_anatomy` times each part for several
k1 on the same frames, in one process:

    frame_ms      whole frames, p50
    open_ms       the first graph replayed and read, p50
    more_ms       one more graph replayed and read, p50
    round_ms      a round inside the graph: (open_ms of the largest k1 - of the smallest) / their difference
    read_ms       what a graph's launch and read add: more_ms - k2 * round_ms
    rounds        rounds that did work per frame (mean); executed: rounds run, masked ones included (mean)
"""

from __future__ import annotations

import time

import numpy as np
import torch

from helpers.measure.timing import device_sync, time_calls
from helpers.method.drafters import Drafter
from helpers.method.decoding import Decoder
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig
from helpers.method.tree import SparseTree


@torch.no_grad()
def frame_anatomy(predictor: CodePredictor, drafter: Drafter, tree: SparseTree, sampler: SamplerConfig,
                  g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor, compile_mode: str, firsts: list[int],
                  then: int = 1, iters: int = 100) -> dict:
    """The parts above for each k1 in `firsts` (rounds of the first graph), k2 = `then`. g [F, Ht], c0 [F],
    u [F, 15] on the model's device. -> {"rows": {k1: {...}}, "round_ms", "read_ms", "best_first"}"""
    sync = device_sync(predictor.device)
    rows = {}
    for k1 in firsts:
        dec = Decoder(predictor, sampler, drafter, tree, compile_mode, rounds_per_graph=(k1, then))
        dec.decode_frame(g[:1], c0[:1], u[:1])                              # compile / capture
        times, rounds, reads = [], [], []
        for i in range(g.shape[0]):
            sync()
            start = time.perf_counter()
            r = dec.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1])
            sync()
            times.append(time.perf_counter() - start)
            rounds.append(r.calls - 1)
            reads.append(r.reads)
        graphs = dec.runner                                            # `RoundGraphs`: its two graphs
        buffers = graphs.progress + dec.buffers(1)                     # query, t, rounds, k, v, u, codes
        open_ms = time_calls(lambda: int(graphs.first(g[:1], c0[:1], *buffers)), predictor.device, 5, iters).p50
        more_ms = time_calls(lambda: int(graphs.then(*buffers)), predictor.device, 5, iters).p50
        rows[k1] = {"frame_ms": float(np.median(times) * 1e3), "rounds": float(np.mean(rounds)),
                    "executed": float(np.mean([k1 + then * (n - 1) for n in reads])), "reads": float(np.mean(reads)),
                    "open_ms": open_ms, "more_ms": more_ms}
    lo, hi = min(firsts), max(firsts)
    round_ms = (rows[hi]["open_ms"] - rows[lo]["open_ms"]) / (hi - lo) if hi > lo else None
    return {"compile": compile_mode, "then": then, "frames": g.shape[0], "rows": rows, "round_ms": round_ms,
            "read_ms": rows[lo]["more_ms"] - then * round_ms if round_ms is not None else None,
            "best_first": min(rows, key=lambda k: rows[k]["frame_ms"])}


def format_frame_anatomy(a: dict) -> str:
    lines = [f"{'k1':>3} {'frame ms':>8} {'open ms':>8} {'more ms':>8} {'rounds':>6} {'executed':>8} {'reads':>5}"]
    for k1, r in a["rows"].items():
        lines.append(f"{k1:3d} {r['frame_ms']:8.3f} {r['open_ms']:8.3f} {r['more_ms']:8.3f} {r['rounds']:6.2f} "
                     f"{r['executed']:8.2f} {r['reads']:5.2f}")
    if a["round_ms"] is not None:
        lines.append(f"a round in the graph {a['round_ms']:.3f} ms; a graph's launch and read {a['read_ms']:.3f} ms; "
                     f"best k1 {a['best_first']}")
    return "\n".join(lines)
