"""The code predictor as deployed on a CPU: each dtype and matrix kernel (`method.kernels`), timed side by side.

A deployment is a dtype and a kernel (`DEPLOYMENTS`; "ort-*": the calls run by ONNX Runtime, `method.runtime_step`); `deployed` makes the predictors (one copy per dtype, the kernels
share it) and their drafters. Then, in one process, every deployment interleaved with every other:

- `call_grid`: the fused call at q = 1 (the AR call) and q = N + 1 per tree, p50 per (deployment, N) over rounds in
  which every call runs once in a shuffled order; overhead(N) = p50(N) / p50(AR) - 1 (Figure 4's quantity).
- `deployment_frames`: whole frames (the official generate in each dtype, our AR loop and speculative loop per N in
  each deployment), interleaved frame by frame (`timing.interleaved`) on the same uniforms; per deployment, how many
  speculative frames equal its own AR frames. Outside float64 they need not all: a kernel that rounds gives a row of
  a tree call logits a few ulps from the one-row call's. That the codes are still samples of one distribution is
  the parity test's to show (tests/test_kernels.py: independent samples, and a control that must reject).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from helpers.measure.latency import official_generate
from helpers.measure.timing import device_sync, interleaved
from helpers.method.decoding import Decoder, decoder_core, frame_decoders
from helpers.method.drafters import Drafter, make_drafter
from helpers.method.stack import ViewStep, apply
from helpers.method.kernels import RUNTIMES, unsupported
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig
from helpers.method.tree import SparseTree

DEPLOYMENTS = {"float32": (torch.float32, "dense"), "bfloat16": (torch.bfloat16, "dense"),
               "bfloat16-prepacked": (torch.bfloat16, "prepacked"), "w8a16": (torch.bfloat16, "w8a16"),
               "w8a8": (torch.float32, "w8a8"), "ort-float32": (torch.float32, "ort-float32"),
               "ort-w8a8": (torch.float32, "ort-w8a8")}


def in_torch(name: str) -> bool:
    """Whether a deployment's calls run in torch (its phases can be timed inside the call), not in a runtime."""
    return DEPLOYMENTS[name][1] not in RUNTIMES


def runnable(names=DEPLOYMENTS) -> list[str]:
    """The deployments among `names` whose kernel this CPU runs (`kernels.unsupported`: "prepacked" needs AVX-512 or
    AVX-NE-CONVERT)."""
    return [n for n in check_deployments(names) if not unsupported(DEPLOYMENTS[n][1])]


def check_deployments(names) -> list[str]:
    names = list(names)
    unknown = [n for n in names if n not in DEPLOYMENTS]
    if unknown or not names:
        raise ValueError(f"deployments {unknown or names}: each must be one of {list(DEPLOYMENTS)}")
    return names


def deployed(talker: torch.nn.Module, drafter: Drafter | str, depth: int = 3, names=DEPLOYMENTS,
             device: str = "cpu") -> dict[str, tuple[CodePredictor, Drafter]]:
    """{deployment: (predictor, drafter)} of an official talker: one code-predictor copy per dtype (the kernels of a
    dtype share its modules, `CodePredictor.with_kernel`), the drafter copied into each dtype (a trained drafter's
    state, or a fresh drafter of that kind)."""
    by_dtype, out = {}, {}
    for name in check_deployments(names):
        dtype, kernel = DEPLOYMENTS[name]
        if dtype not in by_dtype:
            predictor = CodePredictor.from_talker(talker, dtype=dtype, device=device)
            copy = make_drafter(drafter if isinstance(drafter, str) else drafter.kind, predictor, depth)
            if not isinstance(drafter, str):
                copy.load_state_dict(drafter.state_dict())
            by_dtype[dtype] = predictor, copy
        predictor, copy = by_dtype[dtype]
        out[name] = predictor.with_kernel(kernel), copy
    return out


@torch.no_grad()
def call_grid(systems: dict[str, tuple[CodePredictor, Drafter]], trees: dict[int, SparseTree], warmup: int = 10,
              rounds: int = 60, t: int = 1, seed: int = 0, compiled_sizes=()) -> dict:
    """p50 ms of the AR call and of each tree's verify call, every deployment (the verify call a round makes: its drafts
    come from the stop node alone, one head call per depth, as in `helpers.method.round`, and are not in it);
    with `compiled_sizes`, also the calls compiled by inductor (`compiler.CallCompiler`) at q = 1 and those N, for
    the dense deployments (inductor lays out their weights itself), as "<name>+inductor" (compile time apart).

    -> {name: {"ar_ms", "by_n": {N: {"q", "call_ms", "overhead"}}[, "compile_s"]}} and "rounds", "warmup", "t"."""
    calls, compile_s = {}, {}
    for name, (predictor, drafter) in systems.items():
        ar, decoders = frame_decoders(predictor, drafter, trees, SamplerConfig())
        for n, decoder in [(0, ar), *decoders.items()]:
            step = decoder.modules.verify                        # verify only, as the eager decoders call it
            inputs = step.example_inputs(t)
            calls[name, n] = lambda step=step, inputs=inputs: step(*inputs)
            if predictor.kernel == "dense" and compiled_sizes and (n == 0 or n in compiled_sizes):
                compiled = Decoder(predictor, decoder.sampler, decoder.drafter, decoder.tree, "inductor",
                                   core=decoder.core)            # its verify call gathers rows by index
                fn = compiled.compiler(compiled.modules.verify, [])
                fn(*inputs)                                      # compiled here, booked apart
                calls[f"{name}+inductor", n] = lambda fn=fn, inputs=inputs: fn(*inputs)
                compile_s[f"{name}+inductor"] = compile_s.get(f"{name}+inductor", 0.0) + compiled.compiler.seconds
    sync = device_sync(next(iter(systems.values()))[0].device)
    times = {key: [] for key in calls}
    for _, _, seconds in interleaved(rounds, lambda _: calls, warmup, seed, sync):    # a round: every call once
        for key, s in seconds.items():
            times[key].append(s)
    out = {"rounds": rounds, "warmup": warmup, "t": t}
    for name in dict.fromkeys(key for key, _ in calls):
        ar = float(np.median(times[name, 0])) * 1e3
        out[name] = {"ar_ms": ar, "by_n": {}}
        if name in compile_s:
            out[name]["compile_s"] = compile_s[name]
        for n, tree in trees.items():
            if (name, n) in times:
                ms = float(np.median(times[name, n])) * 1e3
                out[name]["by_n"][n] = {"q": tree.size + 1, "call_ms": ms, "overhead": ms / ar - 1.0}
    return out


@torch.no_grad()
def deployment_frames(systems: dict[str, tuple[CodePredictor, Drafter]], trees: dict[int, SparseTree],
                      g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor, sampler: SamplerConfig = SamplerConfig(),
                      official: bool = True, warmup_frames: int = 2, seed: int = 0, compiled_sizes=(),
                      samples: bool = False, passes: int = 1) -> dict:
    """Whole frames of every deployment, interleaved: g [F, H_talker], c0 [F], u [F, 15] (any dtype; cast per system),
    in `passes` passes over the same frames (codes and calls counted in the first).

    Systems "official@<dtype>" (once per dtype), "ar@<deployment>", "spec<N>@<deployment>"; with `compiled_sizes`,
    for the dense deployments also the compiled loops (`method.decoding`, inductor) "ar@<deployment>+inductor" and
    "spec<N>@<deployment>+inductor" (compiled on a first frame, booked apart as "compile_s").
    -> {"frames", "systems": {name: {"frame_ms" (median of the passes' p50), "passes_ms" (each pass's p50),
        "tokens_per_step"}}, "identical": {deployment: {"spec": {N:
        frames equal to its own AR frames}, "ar_vs_dense": its AR frames equal to its dtype's dense AR loop's}},
        "fastest_ar",
        "fastest_spec", "official": fastest official, "ratios": {"ar_over_official", "spec_over_ar",
        "spec_over_official"} (how many times faster)}; with `samples`, also "samples": {name: {"ms": [...], "calls": [...]}}, every timed frame's wall time and model calls (our loops)"""
    ars, decoders, compiled, compile_s = {}, {}, {}, {}
    for name, (predictor, drafter) in systems.items():
        ars[name], decoders[name] = frame_decoders(predictor, drafter, trees, sampler)
        if compiled_sizes and predictor.kernel == "dense":
            compiled[f"ar@{name}+inductor"] = (predictor, Decoder(predictor, sampler, compile_mode="inductor",
                                                                  rounds_per_graph=(predictor.num_codes - 1, 1)))
            for n in compiled_sizes:
                if n in trees:
                    compiled[f"spec{n}@{name}+inductor"] = (predictor, Decoder(
                        predictor, sampler, drafter, trees[n], "inductor"))
    for key, (predictor, dec) in compiled.items():           # the first frame compiles: booked apart
        start = time.perf_counter()
        dec.decode_frame(g[:1].to(predictor.dtype), c0[:1], u[:1])
        compile_s[key] = time.perf_counter() - start
    dtypes = {}
    for name, (predictor, _) in systems.items():
        dtypes.setdefault(str(predictor.dtype).removeprefix("torch."), predictor)
    codes = {}

    def runs_of(j):
        out = {}
        for name, (predictor, _) in systems.items():
            gi, ci, ui = g[j:j + 1].to(predictor.dtype), c0[j:j + 1], u[j:j + 1]
            out[f"ar@{name}"] = lambda ar=ars[name], gi=gi, ci=ci, ui=ui: ar.decode_frame(gi, ci, ui)
            for n, dec in decoders[name].items():
                out[f"spec{n}@{name}"] = lambda dec=dec, gi=gi, ci=ci, ui=ui: dec.decode_frame(gi, ci, ui)
        for key, (predictor, dec) in compiled.items():
            gi, ci, ui = g[j:j + 1].to(predictor.dtype), c0[j:j + 1], u[j:j + 1]
            out[key] = lambda dec=dec, gi=gi, ci=ci, ui=ui: dec.decode_frame(gi, ci, ui)
        if official:
            for dt, predictor in dtypes.items():
                gi = g[j:j + 1].to(predictor.dtype)
                out[f"official@{dt}"] = lambda p=predictor, gi=gi, ci=c0[j:j + 1]: official_generate(p, gi, ci, sampler)
        return out

    times, calls, per_frame, by_pass = {}, {}, {}, {}
    device = next(iter(systems.values()))[0].device
    for p in range(passes):
        this_pass = {}
        for _, out, seconds in interleaved(g.shape[0], runs_of, warmup_frames, seed + p, device_sync(device)):
            for key, s in seconds.items():
                times.setdefault(key, []).append(s)
                this_pass.setdefault(key, []).append(s)
                if p == 0 and not key.startswith("official"):
                    calls[key] = calls.get(key, 0) + out[key].calls
                    per_frame.setdefault(key, []).append(out[key].calls)
                    codes.setdefault(key, []).append(out[key].codes)
        for key, ts in this_pass.items():
            by_pass.setdefault(key, []).append(float(np.median(ts)) * 1e3)
    num_codes = next(iter(systems.values()))[0].num_codes
    rows = {key: {"frame_ms": float(np.median(by_pass[key])), "passes_ms": by_pass[key],
                  "tokens_per_step": num_codes * len(per_frame[key]) / calls[key] if key in calls else None,
                  **({"compile_s": compile_s[key]} if key in compile_s else {})}
            for key in times}
    def same(a, b):
        return int((torch.cat(codes[a]) == torch.cat(codes[b])).all(dim=1).sum())

    identical = {}
    for name, (predictor, _) in systems.items():
        dense = next((d for d, (p, _) in systems.items() if p.dtype == predictor.dtype and p.kernel == "dense"), None)
        identical[name] = {"spec": {n: same(f"spec{n}@{name}", f"ar@{name}") for n in trees},
                           "ar_vs_dense": same(f"ar@{name}", f"ar@{dense}") if dense else None,
                           "compiled": {k: same(k, f"ar@{name}") for k in compiled if k.split("@")[1] ==
                                        f"{name}+inductor"}}

    def fastest(prefix):
        keys = [k for k in rows if k.startswith(prefix)]
        return min(keys, key=lambda k: rows[k]["frame_ms"]) if keys else None

    best_ar, best_spec, best_official = fastest("ar@"), fastest("spec"), fastest("official@")
    ms = {k: rows[k]["frame_ms"] if k else None for k in (best_ar, best_spec, best_official)}
    ratios = {"spec_over_ar": ms[best_ar] / ms[best_spec]}
    if best_official:
        ratios.update(ar_over_official=ms[best_official] / ms[best_ar],
                      spec_over_official=ms[best_official] / ms[best_spec])
    result = {"frames": g.shape[0], "systems": rows, "identical": identical, "fastest_ar": best_ar,
              "fastest_spec": best_spec, "official": best_official, "ratios": ratios}
    if samples:
        result["samples"] = {k: {"ms": [t * 1e3 for t in times[k]], "calls": per_frame[k] * passes} for k in per_frame}
    return result


def spread(rows: dict, ar: str | None, spec: str | None) -> dict | None:
    """AR p50 / speculative p50 in each interleaved pass (rows: {name: {"passes_ms"}}): {"passes", "median", "min",
    "max"}; None without both loops."""
    if ar is None or spec is None:
        return None
    ratios = [a / s for a, s in zip(rows[ar]["passes_ms"], rows[spec]["passes_ms"])]
    return {"passes": ratios, "median": float(np.median(ratios)), "min": min(ratios), "max": max(ratios)}


def spread_text(s: dict | None) -> str:
    """" (3 interleaved passes: 1.30x, 1.37x, 1.40x; median 1.37x, range 1.30-1.40x)" of a `spread`, "" for None or
    one pass."""
    if not s or len(s["passes"]) < 2:
        return ""
    return (f" ({len(s['passes'])} interleaved passes: " + ", ".join(f"{r:.2f}x" for r in s["passes"])
            + f"; median {s['median']:.2f}x, range {s['min']:.2f}-{s['max']:.2f}x)")


@torch.no_grad()
def identical_frames(predictor: CodePredictor, drafter: Drafter, tree: SparseTree, g: torch.Tensor, c0: torch.Tensor,
                     u: torch.Tensor, sampler: SamplerConfig = SamplerConfig()) -> int:
    """Frames (g [F, H_talker], c0 [F], u [F, 15]) whose speculative codes with `tree` equal the AR codes of the same
    deployment, decoded one frame at a time as the timed loops decode them, untimed."""
    ar, spec = frame_decoders(predictor, drafter, {0: tree}, sampler)
    same = 0
    for j in range(g.shape[0]):
        gj, cj, uj = g[j:j + 1].to(predictor.dtype), c0[j:j + 1], u[j:j + 1]
        same += int(torch.equal(ar.decode_frame(gj, cj, uj).codes, spec[0].decode_frame(gj, cj, uj).codes))
    return same


@torch.no_grad()
def call_phases(predictor: CodePredictor, trees: dict[int, SparseTree], warmup: int = 5,
                rounds: int = 30, t: int = 1, seed: int = 0) -> dict:
    """Where one fused call's time goes (q = 1 and each tree): its projections alone (the same laid-out linears on
    inputs of the same shapes), the rest of the layers (attention over cache and tree, norms, RoPE, copies) and the
    heads (the verify call's: target logits of every query token); p50 ms over interleaved rounds.

    -> {N (0: the AR call): {"q", "call_ms", "projections_ms", "attention_and_small_ops_ms", "heads_ms"}}"""
    from helpers.measure.phases import PhaseClock, clocked
    from helpers.method.kernels import in_features

    core = decoder_core(predictor)                                   # a decoder's core (the predictor's, if dense)
    clock = PhaseClock(device_sync(predictor.device) if predictor.device.type == "cuda" else None)
    gen = torch.Generator(device=predictor.device).manual_seed(seed)
    jobs, steps = {}, []
    for n, tree in [(0, None), *trees.items()]:
        step = ViewStep(core, tree)                                  # verify only, as call_grid times it
        tokens, k, v, _ = step.example_inputs(t)

        def call(step=step, tokens=tokens, k=k, v=v):
            clock.start()
            step.call_at(tokens, k, v, t)                  # its phases, layers and heads, marked by `clocked`
            return dict(clock.seconds)

        shapes = [(w, torch.randn(1, step.q, in_features(w), generator=gen, device=predictor.device,
                                  dtype=predictor.dtype))
                  for layer in core.layer_weights for w in layer.projections]

        def projections(shapes=shapes):
            start = time.perf_counter()
            for w, x in shapes:
                apply(x, w)
            return {"projections": time.perf_counter() - start}

        jobs[n] = (step.q, call, projections)
        steps.append(step)
    samples = {n: [] for n in jobs}
    runs = {(n, i): jobs[n][i] for n in jobs for i in (1, 2)}        # the clocked call and its projections alone
    with clocked(clock, *steps):
        for _, outputs, _ in interleaved(rounds, lambda _: runs, warmup, seed):
            for (n, _), out in outputs.items():
                samples[n].append(out)
    result = {}
    for n, (q, _, _) in jobs.items():
        def p50(key):
            return float(np.median([s[key] for s in samples[n] if key in s])) * 1e3
        layers, heads, proj = p50("layers"), p50("heads"), p50("projections")
        result[n] = {"q": q, "call_ms": layers + heads, "projections_ms": proj,
                     "attention_and_small_ops_ms": layers - proj, "heads_ms": heads}
    return result



REAL_SIZES = (4, 8, 15, 16, 31, 32, 47, 63, 64)          # the paper's N and N + 1 = 16, 32, 48, 64 (full tiles)


def real_shape_grid(names=None, sizes=REAL_SIZES, rounds: int = 40, warmup: int = 5,
                    compiled_sizes=(16, 32), seed: int = 0) -> dict:
    """`call_grid` at the exact shape of the 0.6B code predictor (`adapter.tiny.QWEN3_TTS_0_6B`, random weights,
    reused-head drafts on greedy trees of the reference acceptance table), on the CPU, plus `call_phases` of the
    torch deployment with the cheapest tree call at N = 32 ("phases"). names: default every deployment this CPU runs.
    Several GB of memory; minutes."""
    from helpers.adapter.tiny import QWEN3_TTS_0_6B, build_tiny_talker
    from helpers.method.calibration import REFERENCE_TABLE, greedy_tree

    talker = build_tiny_talker(QWEN3_TTS_0_6B, seed=seed, dtype=torch.float32)
    systems = deployed(talker, "reused", names=runnable() if names is None else names)
    trees = {n: greedy_tree(REFERENCE_TABLE, n) for n in sizes}
    grid = call_grid(systems, trees, warmup, rounds, compiled_sizes=compiled_sizes, seed=seed)
    ref = 32 if 32 in trees else max(trees)
    best = min((name for name in systems if in_torch(name)), key=lambda name: grid[name]["by_n"][ref]["call_ms"])
    grid["phases"] = {"deployment": best, "by_n": call_phases(systems[best][0], {n: trees[n] for n in (16, 32)
                                                                               if n in trees} or trees, seed=seed)}
    grid["shape"] = {k: getattr(QWEN3_TTS_0_6B, k) for k in ("hidden_size", "num_layers", "num_heads", "num_kv_heads",
                                                             "head_dim", "vocab_size", "intermediate_size")}
    return grid


def grid_rows(grid: dict) -> list[dict]:
    """Table rows, one per deployment: AR call p50 ms, then per N "call p50 ms (overhead)"."""
    rows = {k: v for k, v in grid.items() if isinstance(v, dict) and "by_n" in v and "ar_ms" in v}
    sizes = sorted({int(n) for v in rows.values() for n in v["by_n"]})
    return [{"deployment": name, "AR call ms": v["ar_ms"],
             **{f"N={n} ms (overhead)": f"{v['by_n'][n]['call_ms']:.2f} ({v['by_n'][n]['overhead']:+.2f})"
                if n in v["by_n"] else "-" for n in sizes}} for name, v in rows.items()]


def phase_rows(phases: dict) -> list[dict]:
    """Table rows, one per N (0: the AR call): where a call's time goes, p50 ms."""
    return [{"N": n, "q": r["q"], "call ms": r["call_ms"], "projections ms": r["projections_ms"],
             "attention and small ops ms": r["attention_and_small_ops_ms"], "heads and top-k ms": r["heads_ms"]}
            for n, r in phases["by_n"].items()]


def format_grid(grid: dict) -> str:
    """One line per deployment: AR call p50, then call p50 (overhead) per N."""
    rows = {k: v for k, v in grid.items() if isinstance(v, dict) and "by_n" in v and "ar_ms" in v}
    sizes = sorted({int(n) for v in rows.values() for n in v["by_n"]})
    lines = [f"{'deployment':>26} {'AR ms':>7}" + "".join(f" {f'N={n}':>14}" for n in sizes)]
    for name, v in rows.items():
        cells = "".join(f" {v['by_n'][n]['call_ms']:7.2f} ({v['by_n'][n]['overhead']:+.2f})" if n in v["by_n"]
                        else f" {'-':>14}" for n in sizes)
        lines.append(f"{name:>26} {v['ar_ms']:7.2f}{cells}")
    return "\n".join(lines)


def format_phases(phases: dict) -> str:
    lines = [f"where a call's time goes ({phases['deployment']}), p50 ms:",
             f"{'N':>3} {'q':>3} {'call':>7} {'projections':>11} {'attention+small ops':>19} {'heads+top-k':>11}"]
    for n, r in phases["by_n"].items():
        lines.append(f"{n:3d} {r['q']:3d} {r['call_ms']:7.2f} {r['projections_ms']:11.2f} "
                     f"{r['attention_and_small_ops_ms']:19.2f} {r['heads_ms']:11.2f}")
    return "\n".join(lines)


def format_frames(result: dict) -> str:
    rows = result["systems"]
    lines = [f"{'system':>30} {'frame ms':>9} {'tok/step':>8} {'compile s':>9}"]
    for name, r in sorted(rows.items(), key=lambda kv: kv[1]["frame_ms"]):
        tps = f"{r['tokens_per_step']:8.2f}" if r["tokens_per_step"] else f"{'-':>8}"
        comp = f"{r['compile_s']:9.1f}" if "compile_s" in r else f"{'-':>9}"
        lines.append(f"{name:>30} {r['frame_ms']:9.2f} {tps} {comp}")
    ratios = result["ratios"]
    lines.append(f"fastest AR {result['fastest_ar']}, fastest speculative {result['fastest_spec']}: "
                 f"{ratios['spec_over_ar']:.2f}x" + (f"; fastest official {result['official']}, AR over it "
                                                     f"{ratios['ar_over_official']:.2f}x" if result["official"] else ""))
    for name, same in result["identical"].items():
        lines.append(f"  {name}: speculative frames equal to its AR frames "
                     + ", ".join(f"N={n} {v}/{result['frames']}" for n, v in same["spec"].items())
                     + (f"; its AR frames equal to the dense AR's {same['ar_vs_dense']}/{result['frames']}"
                        if same["ar_vs_dense"] is not None else "")
                     + "".join(f"; {k} {v}/{result['frames']}" for k, v in same.get("compiled", {}).items()))
    return "\n".join(lines)
