"""Latency of the fused call and of whole frames: what tokens/step buys on this device.

- `call_sweep`: p10/p50/p90 of the fused call at q = 1 (the AR call) and q = N + 1 for each tree,
  after warm-ups, on CPU or CUDA (synchronised; optionally replayed from a captured CUDA graph).
  overhead(N) = p50(q = N + 1) / p50(q = 1) - 1.
- `frame_latency`: whole frames decoded by our AR loop, by the speculative decoder per tree, and by the
  official `code_predictor.generate` as the `qwen_tts` talker calls it, interleaved frame by frame in
  one process on the same frames; medians per frame, measured tokens/step, measured speedup.
- `latency_table`: both joined per N: call_ms_p10/p50/p90, overhead, tokens_per_step,
  realised_speedup = tokens_per_step / (1 + overhead), measured_speedup, and its ratio to tokens_per_step.
- `latency_metrics`: all of it for one device, what notebook 06 writes under `latency.<device>.<N>`,
  with `profile.round_profile`: the AR step and the round split into phases, to see where time goes.

Everything returns plain dataclasses / dicts (JSON-ready); the timing itself is `helpers.measure.timing`.
`make bench` (`helpers.experiment.bench.bench`) runs it on the miniature.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Callable

import numpy as np
import torch

from helpers.measure.machine import load_average, timed_on
from helpers.measure.speedup import formula
from helpers.method.predictor import CodePredictor
from helpers.method.decoding import frame_decoders
from helpers.method.drafters import Drafter
from helpers.method.stack import FusedStep
from helpers.measure.profile import round_profile
from helpers.measure.timing import device_sync, interleaved, time_calls
from helpers.method.compiler import CapturedGraph
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.method.tree import SparseTree

SIZES = (4, 8, 15, 16, 31, 32, 47, 63, 64)       # the paper's N and N + 1 = 16, 32, 48, 64 (full tiles)


def graphed(step: FusedStep, inputs) -> Callable[[], object]:
    """Capture step(*inputs) in a CUDA graph (fixed shapes, gather path; `CapturedGraph`); returns a replay
    function. Inputs are the graph's static buffers: copy new values into them before replaying."""
    graph = CapturedGraph(step, list(inputs))
    graph.capture(tuple(inputs))
    return graph.graph.replay


@torch.no_grad()
def call_sweep(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree], warmup: int = 20,
               iters: int = 200, cuda_graph: bool = False, t: int = 1) -> dict:
    """Per-call latency of the AR call (q = 1) and the fused call of each tree (q = N + 1), root at t.

    -> {"device", "cuda_graph", "ar": Percentiles, "trees": {N: {"q", "call": Percentiles, "overhead"}}}
    """
    device = predictor.device
    if cuda_graph and device.type != "cuda":
        raise ValueError(f"CUDA graphs need a CUDA model, this one is on {device}")
    ar_decoder, decoders = frame_decoders(predictor, drafter, trees, SamplerConfig(),
                                          views=False if cuda_graph else None)        # as the decoders call it

    def timed(step):
        inputs = step.example_inputs(t)
        fn = graphed(step, inputs) if cuda_graph else (lambda: step(*inputs))
        return time_calls(fn, device, warmup, iters)

    ar = timed(ar_decoder.modules.verify)
    rows = {}
    for n, tree in trees.items():
        call = timed(decoders[n].modules.verify)                                     # the verify call
        rows[n] = {"q": tree.size + 1, "call": asdict(call), "overhead": call.p50 / ar.p50 - 1.0}
    return {"device": str(device), "cuda_graph": cuda_graph, "ar": asdict(ar), "trees": rows}


@torch.no_grad()
def official_generate(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, sampler: SamplerConfig):
    """One frame through `code_predictor.generate`, called as the qwen_tts talker calls it."""
    last_id_hidden = predictor.c0_embedding(c0[:, None])
    return predictor.official.generate(
        inputs_embeds=torch.cat((g[:, None].to(last_id_hidden.dtype), last_id_hidden), dim=1),
        max_new_tokens=predictor.num_codes, do_sample=True, top_k=sampler.top_k, top_p=sampler.top_p,
        temperature=sampler.temperature, output_hidden_states=True, return_dict_in_generate=True)


@torch.no_grad()
def frame_latency(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree], g: torch.Tensor,
                  c0: torch.Tensor, u: torch.Tensor, sampler: SamplerConfig = SamplerConfig(),
                  official: bool = True, warmup_frames: int = 2, seed: int = 0) -> dict:
    """Whole frames, one at a time: official generate, our AR loop and our speculative decoder per N, in a
    shuffled order on every frame (`timing.interleaved`).

    g [F, H_talker], c0 [F], u [F, 15]. Checks every speculative frame equals the AR frame.
    -> {"frames", "ar_ms", "official_ms", "ar_over_official", "trees": {N: {"frame_ms", "tokens_per_step",
        "measured_speedup", "speedup_over_tps", "identical"}}} (medians of per-frame milliseconds)
    """
    ar, decoders = frame_decoders(predictor, drafter, trees, sampler)
    decoders = {str(n): dec for n, dec in decoders.items()}
    times: dict[str, list[float]] = {"ar": [], "official": [], **{n: [] for n in decoders}}
    calls = {n: 0 for n in decoders}
    same = {n: 0 for n in decoders}
    frames = g.shape[0]

    def runs_of(j):
        gi, ci, ui = g[j:j + 1], c0[j:j + 1], u[j:j + 1]
        runs = {"ar": lambda: ar.decode_frame(gi, ci, ui),
                **{n: (lambda dec=dec: dec.decode_frame(gi, ci, ui)) for n, dec in decoders.items()}}
        if official:
            runs["official"] = lambda: official_generate(predictor, gi, ci, sampler)
        return runs

    for _, out, seconds in interleaved(frames, runs_of, warmup_frames, seed, device_sync(predictor.device)):
        for name, s in seconds.items():
            times[name].append(s)
        for n in decoders:
            calls[n] += out[n].calls
            same[n] += bool(torch.equal(out[n].codes, out["ar"].codes))
    med = {k: float(np.median(v)) * 1e3 if v else None for k, v in times.items()}
    result = {"frames": frames, "ar_ms": med["ar"], "official_ms": med["official"],
              "ar_over_official": med["official"] / med["ar"] if official else None, "trees": {}}
    for n, tree in trees.items():
        tps = predictor.num_codes * frames / calls[str(n)]
        speedup = med["ar"] / med[str(n)]
        result["trees"][n] = {"frame_ms": med[str(n)], "tokens_per_step": tps, "measured_speedup": speedup,
                              "speedup_over_tps": speedup / tps, "identical": same[str(n)] == frames}
    return result


def latency_table(sweep: dict, loop: dict | None = None, tokens_per_step: dict[int, float] | None = None) -> dict:
    """Join a `call_sweep` and (optionally) an `inner_loop` per N.

    tokens_per_step: measured by `loop` when given, else from `tokens_per_step` (e.g. expected from calibration).
    -> {"ar": {"call_ms_p10", "call_ms_p50", "call_ms_p90"[, "frame_ms"]}, "official": {"frame_ms", "over_ar"}
        or None, "best_n", "by_n": {N: {"q", "call_ms_p10", "call_ms_p50", "call_ms_p90", "overhead",
        "tokens_per_step", "realised_speedup"[, "frame_ms", "measured_speedup", "measured_over_tps", "identical"]}}}
    realised_speedup = tokens_per_step / (1 + overhead); overhead = call_ms_p50 / AR call_ms_p50 - 1; best_n by
    measured_speedup when measured, else by realised_speedup.
    """
    def ms(p: dict) -> dict:
        return {"call_ms_p10": p["p10"], "call_ms_p50": p["p50"], "call_ms_p90": p["p90"]}

    ar = ms(sweep["ar"])
    rows = {}
    for n, row in sweep["trees"].items():
        tps = loop["trees"][n]["tokens_per_step"] if loop else (tokens_per_step or {}).get(n)
        r = {"q": row["q"], **ms(row["call"]), "overhead": row["overhead"], "tokens_per_step": tps,
             "realised_speedup": formula(tps, 1.0 + row["overhead"]) if tps else None}
        if loop:
            m = loop["trees"][n]
            r.update(frame_ms=m["frame_ms"], measured_speedup=m["measured_speedup"],
                     measured_over_tps=m["speedup_over_tps"], identical=m["identical"])
        rows[n] = r
    official = None
    if loop:
        ar["frame_ms"] = loop["ar_ms"]
        if loop["official_ms"] is not None:
            official = {"frame_ms": loop["official_ms"], "over_ar": loop["ar_over_official"]}
    key = "measured_speedup" if loop else "realised_speedup"
    scored = [n for n in rows if rows[n].get(key)]
    best = max(scored, key=lambda n: rows[n][key]) if scored else None
    return {"ar": ar, "official": official, "best_n": best, "by_n": rows}


@torch.no_grad()
def latency_metrics(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree], g: torch.Tensor,
                    c0: torch.Tensor, sampler: SamplerConfig = SamplerConfig(), calls: int = 200, warmup: int = 20,
                    cuda_graph: bool = False, official: bool = True, seed: int = 0, profile_frames: int = 100) -> dict:
    """Everything notebook 06 reports for this device: per-call latency per N and whole frames measured.

    Runs where the predictor (and drafter) live; move them first for another device.
    g [F, H_talker] talker states and c0 [F] their first codes, from real frames (teacher forcing or
    free-running synthesis); the frames' uniforms are drawn from `seed`. trees {N: SparseTree}.
    calls/warmup: timed and untimed fused calls per size (q = 1 and q = N + 1, root at t = 1).
    profile_frames: the first frames profiled phase by phase (`profile.round_profile`), after the timed run.
    -> `latency_table`'s dict ({"ar", "official", "best_n", "by_n": {N: {call_ms_p50, call_ms_p10,
       call_ms_p90, overhead, tokens_per_step, realised_speedup, measured_speedup, ...}}}) plus "device"
       (e.g. "cpu", "cuda:0 (NVIDIA H200)"), "cuda_graph", "frames", "machine" (`machine.timed_on`: with the load
       average at the start and end) and "profile" (`profile.round_profile`:
       where the time of an AR step and of a round goes, on the same frames).
    """
    device, start = predictor.device, load_average()
    sweep = call_sweep(predictor, drafter, trees, warmup, calls, cuda_graph=cuda_graph)
    u = frame_uniforms(torch.Generator().manual_seed(seed), predictor.num_codes, batch=g.shape[0], device=device)
    g, c0 = g.to(device), c0.to(device)
    loop = frame_latency(predictor, drafter, trees, g, c0, u, sampler, official, seed=seed)
    f = min(profile_frames, g.shape[0])
    profile = round_profile(predictor, drafter, trees, g[:f], c0[:f], u[:f], sampler, seed=seed)
    name = str(device) + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "")
    return {"device": name, "cuda_graph": cuda_graph, "frames": g.shape[0], **latency_table(sweep, loop),
            "profile": profile, "machine": timed_on(start)}


def format_table(table: dict) -> str:
    ar, official = table["ar"], table["official"]
    lines = [f"AR call p50 {ar['call_ms_p50']:.3f} ms"]
    if "frame_ms" in ar:
        lines.append(f"frame medians: our AR loop {ar['frame_ms']:.2f} ms"
                     + (f", official generate {official['frame_ms']:.2f} ms (official / ours {official['over_ar']:.2f})"
                        if official else ""))
    measured = "frame_ms" in ar
    head = f"{'N':>3} {'q':>3} {'call p50 ms':>11} {'overhead':>8} {'toks/step':>9} {'realised':>8}"
    if measured:
        head += f" {'frame ms':>9} {'measured':>8} {'meas/tps':>8}"
    lines.append(head)
    for n, r in table["by_n"].items():
        tps = f"{r['tokens_per_step']:9.2f}" if r["tokens_per_step"] else f"{'-':>9}"
        real = f"{r['realised_speedup']:8.2f}" if r["realised_speedup"] else f"{'-':>8}"
        line = f"{n:3d} {r['q']:3d} {r['call_ms_p50']:11.3f} {r['overhead']:8.3f} {tps} {real}"
        if measured:
            line += f" {r['frame_ms']:9.2f} {r['measured_speedup']:8.2f} {r['measured_over_tps']:8.2f}"
        lines.append(line)
    lines.append(f"best N: {table['best_n']}")
    return "\n".join(lines)
