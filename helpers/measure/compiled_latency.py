"""Compiled vs eager, side by side: whole frames of every system in one process, and the compiled round's parts.

- `side_by_side`: the official `code_predictor.generate`, our AR loop eager and compiled, our speculative loop
  eager and compiled per N, interleaved frame by frame (`timing.interleaved`) on the same frames and uniforms;
  per-frame p50 of each system, the ratio between every pair, tokens/step, codes identical to the eager AR
  loop, and the compile (or CUDA-graph capture) time of each compiled system, booked apart.
- `cuda_graph_comparison`: the same on CUDA with graph capture: eager vs graph-captured AR vs graph-captured
  speculative (what a GPU check imports; on CPU it refuses with a clear error, `side_by_side` runs anywhere).
- `compiled_round_profile`: per-call p50 at root t of the compiled AR call, the compiled verify-only call
  (layers + target heads), and the whole compiled round (+ sampling of every token, walk, commit, stop-node
  drafts), so a round's excess over an AR call reads part by part.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from helpers.measure.latency import official_generate
from helpers.measure.phases import UNTIL, RoundUpTo
from helpers.measure.timing import device_sync, interleaved, time_calls
from helpers.method.compiler import CallCompiler, check_compile_mode
from helpers.method.decoding import Decoder, frame_decoders
from helpers.method.drafters import Drafter
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.method.predictor import CodePredictor
from helpers.method.tree import SparseTree


@torch.no_grad()
def side_by_side(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree], g: torch.Tensor,
                 c0: torch.Tensor, u: torch.Tensor, sampler: SamplerConfig = SamplerConfig(),
                 compile_mode: str = "inductor", official: bool = True, eager: bool = True,
                 warmup_frames: int = 2, seed: int = 0, torch_backend: str | None = None,
                 frame_graph: bool = True, extra: dict | None = None) -> dict:
    """Whole frames of every system, interleaved. g [F, H_talker], c0 [F], u [F, 15], on the model's device.

    Systems: "official", "ar", "ar_<compile>" (one host call a step), "arframe_<compile>" (the whole AR frame one
    graph, with `frame_graph`), "spec<N>", "spec<N>_<compile>" (eager ones when `eager`), and `extra` {name:
    decoder} (names starting "ar" or "spec" count as AR or speculative; e.g. `Decoder`s with rounds_per_graph).
    -> {"frames", "compile", "systems": {name: {"frame_ms" (p50), "frame_ms_p10", "tokens_per_step",
        "identical" (frames equal to the eager AR codes), "compile_s"}}, "ratios": {a: {b: p50(b) / p50(a)}}
        (how many times faster a is than b), "fastest_ar", "fastest_spec", "best_n"}
    """
    device = predictor.device
    ar, eager_spec = frame_decoders(predictor, drafter, trees if eager else {}, sampler)   # ar: the reference too
    systems: dict[str, object] = {}
    if eager:
        systems["ar"] = None
    mode = compile_mode
    compiled: dict[str, object] = {}
    if mode != "none":
        compiled[f"ar_{mode}"] = Decoder(predictor, sampler, compile_mode=mode, torch_backend=torch_backend)
        if frame_graph:
            compiled[f"arframe_{mode}"] = Decoder(predictor, sampler, compile_mode=mode, torch_backend=torch_backend,
                                                  rounds_per_graph=(predictor.num_codes - 1, 1))
    for n, tree in trees.items():
        if eager:
            systems[f"spec{n}"] = eager_spec[n]
        if mode != "none":
            compiled[f"spec{n}_{mode}"] = Decoder(predictor, sampler, drafter, tree, mode, torch_backend=torch_backend)
    compiled.update(extra or {})
    compile_s = {}
    for name, dec in compiled.items():                       # first frame: compile / capture, booked apart
        start = time.perf_counter()
        dec.decode_frame(g[:1], c0[:1], u[:1])
        compile_s[name] = time.perf_counter() - start
    systems.update(compiled)
    frames = g.shape[0]
    reference = {}

    def runs_of(j):
        gi, ci, ui = g[j:j + 1], c0[j:j + 1], u[j:j + 1]
        if j not in reference:
            reference[j] = ar.decode_frame(gi, ci, ui).codes
        runs = {}
        for name, dec in systems.items():
            runs[name] = ((lambda: ar.decode_frame(gi, ci, ui)) if dec is None
                          else (lambda dec=dec: dec.decode_frame(gi, ci, ui)))
        if official:
            runs["official"] = lambda: official_generate(predictor, gi, ci, sampler)
        return runs

    times: dict[str, list[float]] = {}
    calls: dict[str, int] = {}
    reads: dict[str, list[int]] = {}
    same: dict[str, int] = {}
    for j, out, seconds in interleaved(frames, runs_of, warmup_frames, seed, device_sync(device)):
        for name, s in seconds.items():
            times.setdefault(name, []).append(s)
            if name != "official":
                calls[name] = calls.get(name, 0) + out[name].calls
                if out[name].reads is not None:
                    reads.setdefault(name, []).append(out[name].reads)
                same[name] = same.get(name, 0) + bool(torch.equal(out[name].codes, reference[j]))
    rows = {}
    for name, ts in times.items():
        ms = np.asarray(ts) * 1e3
        rows[name] = {"frame_ms": float(np.median(ms)), "frame_ms_p10": float(np.percentile(ms, 10)),
                      "tokens_per_step": predictor.num_codes * frames / calls[name] if name in calls else None,
                      "identical": same.get(name), "compile_s": compile_s.get(name),
                      "reads_per_frame": float(np.mean(reads[name])) if name in reads else None}
    ratios = {a: {b: rows[b]["frame_ms"] / rows[a]["frame_ms"] for b in rows} for a in rows}
    ars = [k for k in rows if k.startswith("ar")]
    specs = [k for k in rows if k.startswith("spec")]
    fastest_ar = min(ars, key=lambda k: rows[k]["frame_ms"]) if ars else None
    fastest_spec = min(specs, key=lambda k: rows[k]["frame_ms"]) if specs else None
    best_n = next((n for n in trees if fastest_spec in (f"spec{n}", f"spec{n}_{mode}")), None)
    return {"frames": frames, "compile": mode, "device": str(device), "systems": rows, "ratios": ratios,
            "fastest_ar": fastest_ar, "fastest_spec": fastest_spec, "best_n": best_n}


def format_side_by_side(result: dict) -> str:
    """One line per system: p50, p10, official / it, fastest AR / it, tokens/step, identical, compile s."""
    rows, ratios = result["systems"], result["ratios"]
    ref_ar = result["fastest_ar"]
    lines = [f"{'system':>20} {'p50 ms':>8} {'p10 ms':>8} {'off./x':>7} {'bestAR/x':>8} {'tok/step':>8} "
             f"{'identical':>9} {'compile s':>9}"]
    for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["frame_ms"]):
        off = f"{ratios[name]['official']:7.2f}" if "official" in rows else f"{'-':>7}"
        best = f"{ratios[name][ref_ar]:8.2f}" if ref_ar else f"{'-':>8}"
        tps = f"{r['tokens_per_step']:8.2f}" if r["tokens_per_step"] else f"{'-':>8}"
        same = f"{r['identical']}/{result['frames']}" if r["identical"] is not None else "-"
        comp = f"{r['compile_s']:9.1f}" if r["compile_s"] is not None else f"{'-':>9}"
        lines.append(f"{name:>20} {r['frame_ms']:8.2f} {r['frame_ms_p10']:8.2f} {off} {best} {tps} {same:>9} {comp}")
    lines.append(f"fastest AR: {ref_ar}; fastest speculative: {result['fastest_spec']} (N = {result['best_n']})")
    return "\n".join(lines)


@torch.no_grad()
def cuda_graph_comparison(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree],
                          g: torch.Tensor, c0: torch.Tensor, sampler: SamplerConfig = SamplerConfig(),
                          official: bool = True, seed: int = 0) -> dict:
    """On CUDA: eager AR and speculative loops vs their CUDA-graph-captured versions (and the official generate),
    whole frames interleaved; `side_by_side`'s dict (systems "ar", "ar_cuda_graph", "spec<N>",
    "spec<N>_cuda_graph", "official"). g [F, H_talker], c0 [F]; uniforms drawn from `seed`.
    Predictor and drafter must already be on the CUDA device."""
    check_compile_mode("cuda_graph", predictor.device)
    device = predictor.device
    u = frame_uniforms(torch.Generator().manual_seed(seed), predictor.num_codes, batch=g.shape[0], device=device)
    out = side_by_side(predictor, drafter, trees, g.to(device), c0.to(device), u, sampler, "cuda_graph",
                       official=official, seed=seed)
    out["device"] = f"{device} ({torch.cuda.get_device_name(device)})"
    return out


@torch.no_grad()
def compiled_round_profile(predictor: CodePredictor, drafter: Drafter, trees: dict[int, SparseTree],
                           sampler: SamplerConfig = SamplerConfig(), compile_mode: str = "inductor", t: int = 1,
                           warmup: int = 20, iters: int = 200, torch_backend: str | None = None,
                           phases: tuple[int, ...] = ()) -> dict:
    """Per-call p50 (ms) at root position t of the compiled AR call and, per N, of the compiled verify-only call
    (the fused call without drafts: layers + target heads, its outputs left on the device) and the whole
    compiled round (+ sampling of every query token, the walk, the commit, the stop node's drafts); for the N in
    `phases`, also the round up to the end of each phase of `UNTIL` (`helpers.measure.phases.RoundUpTo`), each
    its own compiled call.

    -> {"ar_call_ms", "trees": {N: {"q", "verify_ms", "round_ms", "verify_minus_ar_ms" (verify - AR call, ms),
        "round_minus_verify_ms" (sample + walk + commit + drafts, ms), "verify_over_ar" (verify / AR call) and
        "round_over_ar" (round / AR call): ratios, "upto_ms"
        {phase: ms of the round up to its end} (N in phases)}}, "compile_s"}
    """
    device = predictor.device
    compiler = CallCompiler(compile_mode, device, torch_backend)
    ar_decoder, decoders = frame_decoders(predictor, drafter, trees, sampler, views=False)   # the gathered calls
    gen = torch.Generator(device=device).manual_seed(0)
    k, v, u, codes = ar_decoder.buffers(1)                          # + the spare slot in codes
    k.copy_(torch.randn(k.shape, generator=gen, device=device, dtype=k.dtype))
    v.copy_(torch.randn(v.shape, generator=gen, device=device, dtype=v.dtype))
    u.copy_(torch.rand(predictor.num_codes, generator=gen, device=device, dtype=torch.float64))
    t_in = torch.tensor([t], device=device)
    state = [k, v, u, codes]

    def p50(fn, *args):
        return time_calls(lambda: fn(*args), device, warmup, iters).p50

    ar = compiler(ar_decoder.modules.step, state)
    token = torch.zeros(1, 1, dtype=torch.long, device=device)
    out = {"ar_call_ms": p50(ar, token, k, v, t_in, u, codes), "trees": {}}
    for n, decoder in decoders.items():
        tree_round, step = decoder.modules.step, decoder.modules.verify    # the verify call, compiled on its own
        query = torch.randint(0, predictor.vocab_size, (1, step.q), generator=gen, device=device)
        verify = p50(compiler(step, state), query, k, v, t_in)
        rnd = compiler.kernels(tree_round)
        full = p50(compiler.capture(rnd, state), query, k, v, t_in, u, codes)
        ar_ms = out["ar_call_ms"]
        out["trees"][n] = {"q": step.q, "verify_ms": verify, "round_ms": full, "verify_minus_ar_ms": verify - ar_ms,
                           "round_minus_verify_ms": full - verify, "verify_over_ar": verify / ar_ms,
                           "round_over_ar": full / ar_ms}
        if n in phases:
            out["trees"][n]["upto_ms"] = {phase: p50(compiler(RoundUpTo(tree_round, phase), state), query, k, v,
                                                     t_in, u, codes) for phase in UNTIL}
    out["compile_s"] = compiler.seconds
    return out


def format_round_profile(profile: dict) -> str:
    lines = [f"compiled AR call p50 {profile['ar_call_ms']:.3f} ms",
             f"{'N':>3} {'q':>3} {'verify ms':>9} {'round ms':>8} {'+layers/heads':>13} {'+sample/walk/commit/drafts':>26}"
             f" {'round/AR':>8}"]
    for n, r in profile["trees"].items():
        lines.append(f"{n:3d} {r['q']:3d} {r['verify_ms']:9.3f} {r['round_ms']:8.3f} {r['verify_minus_ar_ms']:+13.3f} "
                     f"{r['round_minus_verify_ms']:+26.3f} {r['round_over_ar']:8.2f}")
    return "\n".join(lines)
