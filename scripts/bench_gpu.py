"""`make bench-gpu`: where speculation must pay, a GPU at batch 1. One command, offline, minutes; JSON and Markdown.

    python scripts/bench_gpu.py --out outputs/gpu-reference            # CUDA (H100 / H200): about 5 minutes
    python scripts/bench_gpu.py --device cpu --quick --out outputs/bench-gpu-cpu  # this CPU: the same code, eager modes only

It reads the shipped miniature (outputs/gpu-pack/: the code predictor, trained drafters, calibration tables and
validation frames; `helpers.experiment.bench.inner_loop_pack`), so it trains nothing and needs no espeak, and builds the
0.6B shape with random weights. docs/gpu.md says how to run it on a bare CUDA machine. Four parts:

(a) miniature, float32, whole frames side by side on the same frames and uniforms (`side_by_side`): the official
    generate; AR eager, one graph per step (cuda_graph), the frame one graph (cuda_graph, inductor_graph);
    speculative per N: eager, one graph per round with a host read after each (cuda_graph), and
    the k-rounds-per-graph `Decoder` (first graph of k1 rounds, k1 from the calibrated tokens/step; cuda_graph, inductor_graph).
    Codes checked equal to the eager AR loop's, frame by frame.
(b) the captured round's parts at t = 1 (AR call, verify call, whole round) in cuda_graph and inductor_graph.
(c) kernels per AR step and per round, host reads per frame (`helpers.measure.kernel_counts`).
(d) the 0.6B shape, bfloat16, random weights: captured AR call, verify and round per N (cuda_graph,
    inductor_graph), and the projection from the measured round and the paper's own tokens/step (N = 16, 32).
(e) exactness in float64 on the device: every mode's AR frame, per-round and frame decoders against the eager AR loop;
    at the real size (f's model, a few frames) the AR frame and the k-rounds-per-graph `Decoder` too, and its AR codes against
    the miniature's.
(f) the miniature at the real code predictor's size (`helpers.adapter.full_size`: the same codes at the 0.6B shape's
    cost), bfloat16: whole frames side by side in every mode, as (a), speedups measured, not projected.
--parts picks some of mini (a-c), real (d), exact (e), full (f); --name the files' name.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NEEDS = ("torch", "transformers", "qwen_tts", "safetensors", "numpy", "yaml", "librosa", "soundfile")
PAPER_TOKENS_PER_STEP = {16: 2.25, 32: 2.47}         # the paper's offsets, at its own N (paper_numbers.yaml)


def _shown(path: str) -> str:
    """A path as recorded: relative to the repository where it lies inside it, else its last part (no machine paths)."""
    resolved = Path(path).resolve()
    return os.path.relpath(resolved, ROOT) if resolved.is_relative_to(ROOT) else resolved.name


def missing_packages() -> list[str]:
    """The packages this command imports that are not importable here (docs/gpu.md: the wheels to carry)."""
    out = []
    for name in NEEDS:
        try:
            importlib.import_module(name)
        except Exception as err:                      # noqa: BLE001: any import failure is a missing package
            out.append(f"{name} ({type(err).__name__}: {err})")
    return out


def projection(ar_ms: float, round_ms: float, tokens_per_step: float, num_codes: int = 15) -> dict:
    """Projected whole-frame speedup of speculation over AR from one AR call and one round: AR = 15 calls, the
    speculative frame = the prefill (an AR call) + (15 / tokens_per_step - 1) rounds."""
    from helpers.measure.speedup import formula, frame_speedup

    return {"tokens_per_step": tokens_per_step, "round_over_ar": round_ms / ar_ms,
            "per_call": formula(tokens_per_step, round_ms / ar_ms),
            "frame": frame_speedup(tokens_per_step, round_ms / ar_ms, num_codes)}


def mini_part(args, device, modes, out: dict, save) -> None:
    import torch

    from helpers.experiment.bench.inner_loop_pack import load_pack
    from helpers.measure.compiled_latency import compiled_round_profile
    from helpers.measure.frame_anatomy import format_frame_anatomy, frame_anatomy
    from helpers.measure.kernel_counts import kernel_counts
    from helpers.method.calibration import expected_tokens_per_step
    from helpers.method.decoding import first_rounds
    from helpers.method.sampler import frame_uniforms

    pack = load_pack(args.pack, device)
    p, d, sampler = pack.predictor, pack.drafters[pack.main], pack.sampler
    table = pack.tables[pack.main]
    trees = {n: pack.trees[pack.main][n] for n in args.sizes}
    g, c0 = pack.g[:args.frames], pack.c0[:args.frames]
    u = frame_uniforms(torch.Generator().manual_seed(args.seed), p.num_codes, batch=g.shape[0], device=device)
    expected = {n: expected_tokens_per_step(t, table) for n, t in trees.items()}
    first = {n: first_rounds(expected[n]) for n in trees}
    out["mini"] = {"drafter": pack.main, "frames": g.shape[0], "expected_tokens_per_step": expected,
                   "first_rounds": first}
    graph_modes = [m for m in modes if m != "none"]
    largest = max(trees)
    mode = graph_modes[-1] if graph_modes else "none"
    k1 = first[largest]
    firsts = sorted({max(1, min(p.num_codes - 1, k1 + j)) for j in (-5, -4, -3, -2, -1, 0, 1)})
    out["mini"]["anatomy"] = frame_anatomy(p, d, trees[largest], sampler, g, c0, u, mode, firsts,
                                           iters=args.iters)
    print(f"the frame's parts, N = {largest}, {mode}:\n" + format_frame_anatomy(out["mini"]["anatomy"]), flush=True)
    save()
    shift = k1 - out["mini"]["anatomy"]["best_first"]         # the first graph's size that paid best, for every N
    first = {n: max(1, f - shift) for n, f in first.items()}
    out["mini"]["first_rounds_used"] = first
    t0 = time.perf_counter()
    out["mini"]["side_by_side"] = frames_side_by_side(p, d, trees, sampler, g, c0, u, modes, first, args.seed)
    out["mini"]["side_by_side_s"] = time.perf_counter() - t0
    print(format_frames(out["mini"]["side_by_side"]), flush=True)
    save()
    out["mini"]["round_parts"] = {}
    for mode in graph_modes:                         # inductor: the largest N alone (each N compiles its calls)
        sizes = trees if mode == "cuda_graph" else {largest: trees[largest]}
        out["mini"]["round_parts"][mode] = compiled_round_profile(p, d, sizes, sampler, mode, iters=args.iters,
                                                                  phases=(largest,))
        save()
    out["mini"]["kernels"] = kernel_counts(p, d, trees, g[:10], c0[:10], u[:10], sampler, first)


def frames_side_by_side(p, d, trees, sampler, g, c0, u, modes, first, seed) -> dict:
    """Whole frames of every system in every mode (`side_by_side`, with the frame decoders: the AR frame one graph and
    the k-rounds-per-graph `Decoder` with `first` {N: k1} rounds in its first graph), codes checked against the eager AR loop."""
    from helpers.measure.compiled_latency import side_by_side
    from helpers.method.decoding import Decoder

    graph_modes = [m for m in modes if m != "none"]
    extra = {}
    for mode in graph_modes:
        if mode != modes[1]:                        # side_by_side builds the AR systems of its own mode
            extra[f"arframe_{mode}"] = Decoder(p, sampler, compile_mode=mode, rounds_per_graph=(14, 14))
        for n, tree in trees.items():
            extra[f"spec{n}_frame_{mode}"] = Decoder(p, sampler, d, tree, mode, rounds_per_graph=(first[n], 1))
    if not graph_modes:                              # the CPU check: the frame decoders eagerly
        extra = {f"spec{n}_frame_none": Decoder(p, sampler, d, t, "none", rounds_per_graph=(first[n], 1))
                 for n, t in trees.items()}
    return side_by_side(p, d, trees, g, c0, u, sampler, modes[1] if graph_modes else "none", seed=seed, extra=extra)


def full_pack(args, device, dtype):
    """The shipped miniature at the real code predictor's size (`helpers.adapter.full_size`), in `dtype` on `device`:
    (full-size predictor, its main drafter, trees {N}, sampler, g [F, 1024], c0 [F], the miniature's pack)."""
    import torch

    from helpers.adapter.full_size import full_size
    from helpers.experiment.bench.inner_loop_pack import load_pack
    from helpers.method.predictor import CodePredictor

    pack = load_pack(args.pack, device, torch.float64 if dtype == torch.float64 else torch.float32)
    fs = full_size(pack.talker)
    p = CodePredictor.from_talker(fs.talker.to(dtype))
    d = fs.drafter(pack.drafters[pack.main], p)
    trees = {n: pack.trees[pack.main][n] for n in args.sizes}
    return p, d, trees, pack.sampler, fs.lift(pack.g[:args.frames]).to(dtype), pack.c0[:args.frames], pack


def full_part(args, device, modes, out: dict, save) -> None:
    """(f) The miniature at the real code predictor's size, bfloat16 on CUDA (float32 on a CPU): whole frames of every
    mode side by side, as (a), each speculative frame checked against the eager AR loop's."""
    import torch

    from helpers.method.calibration import expected_tokens_per_step
    from helpers.method.decoding import first_rounds
    from helpers.method.sampler import frame_uniforms

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    p, d, trees, sampler, g, c0, pack = full_pack(args, device, dtype)
    u = frame_uniforms(torch.Generator().manual_seed(args.seed), p.num_codes, batch=g.shape[0], device=device)
    first = {n: first_rounds(expected_tokens_per_step(t, pack.tables[pack.main])) for n, t in trees.items()}
    out["full"] = {"dtype": str(dtype).replace("torch.", ""), "drafter": pack.main, "frames": g.shape[0],
                   "shape": {"hidden_size": p.hidden_size, "num_layers": len(p.layers), "num_heads": p.num_heads,
                             "num_kv_heads": p.num_kv_heads, "head_dim": p.head_dim, "vocab_size": p.vocab_size}}
    t0 = time.perf_counter()
    out["full"]["side_by_side"] = frames_side_by_side(p, d, trees, sampler, g, c0, u, modes, first, args.seed)
    out["full"]["side_by_side_s"] = time.perf_counter() - t0
    print("the miniature at the real size:\n" + format_frames(out["full"]["side_by_side"]), flush=True)


def real_part(args, device, modes, out: dict, deadline: float, save) -> None:
    import torch

    from helpers.adapter.tiny import QWEN3_TTS_0_6B, build_tiny_talker
    from helpers.measure.compiled_latency import compiled_round_profile
    from helpers.method.calibration import REFERENCE_TABLE, greedy_tree
    from helpers.method.drafters import PositionOffsets
    from helpers.method.predictor import CodePredictor
    from helpers.method.sampler import SamplerConfig

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    talker = build_tiny_talker(QWEN3_TTS_0_6B, seed=0, dtype=dtype).to(device)
    p = CodePredictor.from_talker(talker)
    d = PositionOffsets(p, 3)
    trees = {n: greedy_tree(REFERENCE_TABLE, n) for n in (16, 32)}
    real = out["real"] = {"dtype": str(dtype).replace("torch.", ""), "modes": {}}
    for mode in [m for m in modes if m != "none"] or ["none"]:
        if time.perf_counter() > deadline:
            real["modes"][mode] = {"skipped": "the command's time budget was spent"}
            continue
        t0 = time.perf_counter()
        sizes = trees
        prof = compiled_round_profile(p, d, sizes, SamplerConfig(), mode, iters=args.iters, phases=(32,))
        prof["seconds"] = time.perf_counter() - t0
        prof["projection"] = {n: projection(prof["ar_call_ms"], prof["trees"][n]["round_ms"], tps)
                              for n, tps in PAPER_TOKENS_PER_STEP.items() if n in prof["trees"]}
        real["modes"][mode] = prof
        save()
        print(f"0.6B {mode}: AR call {prof['ar_call_ms']:.3f} ms; " + "; ".join(
            f"N = {n}: verify {r['verify_ms']:.3f}, round {r['round_ms']:.3f} ms ({r['round_over_ar']:.2f} AR calls), "
            f"projected {prof['projection'][n]['frame']:.2f}x" for n, r in prof["trees"].items()), flush=True)


def exact_part(args, device, modes, out: dict, save) -> None:
    """(e) In float64 on the device, every mode's decoders return the eager AR loop's codes frame by frame: the AR
    frame, the per-round speculative decoder and the k-rounds-per-graph `Decoder` (inductor_graph: the largest N alone)."""
    import torch

    from helpers.experiment.bench.inner_loop_pack import load_pack
    from helpers.method.decoding import Decoder
    from helpers.method.sampler import frame_uniforms

    pack = load_pack(args.pack, device, torch.float64)
    p, d, sampler = pack.predictor, pack.drafters[pack.main], pack.sampler
    frames = min(args.frames, 20)
    g, c0 = pack.g[:frames], pack.c0[:frames]
    u = frame_uniforms(torch.Generator().manual_seed(args.seed), p.num_codes, batch=frames, device=device)
    ar = Decoder(p, sampler).decode_frame(g, c0, u).codes
    rows = out["exact"] = {"dtype": "float64", "frames": frames, "identical": {}}
    for mode in modes:
        sizes = args.sizes if mode != "inductor_graph" else [max(args.sizes)]
        decoders = ({f"arframe_{mode}": Decoder(p, sampler, compile_mode=mode, rounds_per_graph=(14, 14))}
                    if mode != "none" else {})
        for n in sizes:
            tree = pack.trees[pack.main][n]
            decoders[f"spec{n}_{mode}"] = Decoder(p, sampler, d, tree, mode)
            decoders[f"spec{n}_frame_{mode}"] = Decoder(p, sampler, d, tree, mode, rounds_per_graph=(4, 1))
        for name, dec in decoders.items():
            rows["identical"][name] = sum(bool(torch.equal(dec.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1])
                                                           .codes[0], ar[i])) for i in range(frames))
        save()
    fp, fd, ftrees, _, fg, fc0, _ = full_pack(args, device, torch.float64)         # the real size: a few frames
    few = min(frames, 4)
    far = Decoder(fp, sampler).decode_frame(fg[:few], fc0[:few], u[:few]).codes
    rows["full_size_identical_to_miniature"] = int((far == ar[:few]).all(dim=1).sum())
    for mode in modes:
        n = max(args.sizes)
        decoders = ({f"full_arframe_{mode}": Decoder(fp, sampler, compile_mode=mode, rounds_per_graph=(14, 14))}
                    if mode != "none" else {})
        decoders[f"full_spec{n}_frame_{mode}"] = Decoder(fp, sampler, fd, ftrees[n], mode, rounds_per_graph=(4, 1))
        for name, dec in decoders.items():
            rows["identical"][name] = sum(bool(torch.equal(dec.decode_frame(fg[i:i + 1], fc0[i:i + 1], u[i:i + 1])
                                                           .codes[0], far[i])) for i in range(few))
        save()
    rows["full_frames"] = few
    print("float64 on the device, frames identical to the eager AR loop: " + ", ".join(
        f"{k} {v}/{frames}" for k, v in rows["identical"].items()), flush=True)


def format_frames(side: dict) -> str:
    from helpers.measure.compiled_latency import format_side_by_side
    return format_side_by_side(side)


def round_parts_line(title: str, prof: dict) -> str:
    """The round up to the end of each phase (`helpers.measure.phases.UNTIL`), per N where phases were timed (ms)."""
    from helpers.measure.phases import UNTIL

    return f"{title}: " + "; ".join(
        f"N = {n}: " + ", ".join(f"{ph} {r['upto_ms'][ph]:.3f}" for ph in UNTIL) + f", round {r['round_ms']:.3f}"
        for n, r in prof["trees"].items() if "upto_ms" in r) + "."


def markdown(out: dict) -> str:
    """The report: machine, the miniature's frames, the round's parts, counts, the 0.6B shape's projection."""
    from helpers.measure.machine import measured_on
    from helpers.report import tables
    from helpers.report.gpu_reference import gpu_frame_rows, gpu_round_rows

    lines = [f"# GPU reference: {out['device']}", "", f"{measured_on(out['machine'])}. torch {out['torch']}; "
             f"{out['seconds']:.0f} s in all. Written by `make bench-gpu` (scripts/bench_gpu.py).", ""]
    mini = out.get("mini")
    if mini:
        side = mini["side_by_side"]
        rows, best_ar = side["systems"], side["fastest_ar"]
        lines += [f"## Miniature, float32, {side['frames']} validation frames ({mini['drafter']} drafter)", "",
                  tables.markdown(gpu_frame_rows(out))]
        spec = side["fastest_spec"]
        lines += ["", f"Fastest AR: {best_ar}; fastest speculative: {spec}, "
                  f"{side['ratios'][spec][best_ar]:.2f}x the fastest AR at {rows[spec]['tokens_per_step']:.2f} "
                  f"tokens/step (measured speedup / tokens/step = "
                  f"{side['ratios'][spec][best_ar] / rows[spec]['tokens_per_step']:.2f}).", ""]
        a = mini.get("anatomy")
        if a:
            lines += [f"The frame's parts, the k-rounds-per-graph `Decoder` at N = {max(mini['first_rounds'], key=int)}, "
                      f"{a['compile']}, k2 = {a['then']} (`helpers.measure.frame_anatomy`):", "",
                      "| k1 | ms per frame | first graph + read, ms | one more graph + read, ms | rounds with work | "
                      "rounds run | reads |", "|---|---|---|---|---|---|---|"]
            lines += [f"| {k1} | {r['frame_ms']:.3f} | {r['open_ms']:.3f} | {r['more_ms']:.3f} | {r['rounds']:.2f} | "
                      f"{r['executed']:.2f} | {r['reads']:.2f} |" for k1, r in a["rows"].items()]
            if a["round_ms"] is not None:
                lines += ["", f"A round inside the graph: {a['round_ms']:.3f} ms; a graph's launch and read: "
                          f"{a['read_ms']:.3f} ms; the fastest first graph: k1 = {a['best_first']}."]
            lines.append("")
        k = mini.get("kernels")
        if k:
            lines += [f"Kernels (dispatched ops): AR step {k['ar_step']}, prefill {k['prefill']}, full-tree round "
                      + ", ".join(f"N = {n}: {c}" for n, c in k["rounds"].items()) + ". Host reads per frame: "
                      + ", ".join(f"{name} {r:.1f}" for name, r in k["reads"].items()) + ".", ""]
    full = out.get("full")
    if full:
        side = full["side_by_side"]
        spec, best_ar = side["fastest_spec"], side["fastest_ar"]
        shape = full["shape"]
        lines += [f"## The miniature at the real code predictor's size, {full['dtype']}, {side['frames']} validation "
                  f"frames (hidden {shape['hidden_size']}, {shape['num_layers']} layers, {shape['num_heads']}/"
                  f"{shape['num_kv_heads']} heads of {shape['head_dim']}, vocabulary {shape['vocab_size']})", "",
                  tables.markdown(gpu_frame_rows(out, "full")), "",
                  f"Fastest AR: {best_ar}; fastest speculative: {spec}, {side['ratios'][spec][best_ar]:.2f}x the "
                  f"fastest AR at {side['systems'][spec]['tokens_per_step']:.2f} tokens/step, measured on whole "
                  "frames.", ""]
    real = out.get("real")
    if mini or real:
        lines += ["## The captured round at t = 1 (p50 of the timed calls; the 0.6B shape with random weights)", "",
                  tables.markdown(gpu_round_rows(out)), ""]
        lines += [f"0.6B shape, {mode}: skipped ({prof['skipped']})." for mode, prof in (real or {}).get(
            "modes", {}).items() if "skipped" in prof] + [round_parts_line(f"Up to the end of each phase, {shape}, {mode}", prof)
                         for shape, modes in (("miniature", (mini or {}).get("round_parts", {})),
                                              ("0.6B shape", (real or {}).get("modes", {})))
                         for mode, prof in modes.items() if any("upto_ms" in r for r in prof.get("trees", {}).values())]
        lines += ["", "Projected: a frame of 15 AR calls against the prefill plus 15 / tokens-per-step - 1 rounds, "
                  "each as measured here, with the paper's tokens/step at its own N.", ""]
    exact = out.get("exact")
    if exact:
        lines += [f"## Exactness, {exact['dtype']} on the device", "", "Frames whose codes equal the eager AR loop's, "
                  f"of {exact['frames']} (full_*: the real size, of {exact.get('full_frames', '-')}): "
                  + ", ".join(f"{k} {v}" for k, v in exact["identical"].items()) + "."
                  + (f" The real size's AR codes equal the miniature's in {exact['full_size_identical_to_miniature']} "
                     "of those frames." if "full_size_identical_to_miniature" in exact else ""), ""]
    for part, err in out.get("errors", {}).items():
        lines += [f"Part {part} failed: {err}", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--quick", action="store_true", help="few frames and calls (a check that the command runs)")
    ap.add_argument("--pack", default=str(ROOT / "outputs" / "gpu-pack"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=330, help="seconds after which the 0.6B inductor part is skipped")
    ap.add_argument("--parts", nargs="+", default=["mini", "full", "real", "exact"],
                    choices=["mini", "full", "real", "exact"])
    ap.add_argument("--name", default="bench_gpu", help="the output files' name (.json, .md)")
    ap.add_argument("--out", default=str(ROOT / "outputs" / "gpu-reference"))
    args = ap.parse_args(argv)
    missing = missing_packages()
    if missing:
        print("missing here: " + "; ".join(missing) + "\nsee docs/gpu.md: the wheels to carry to a bare CUDA machine",
              file=sys.stderr)
        return 2
    import helpers  # noqa: F401  (the numerical pins, before torch's first use)
    import torch

    from helpers.experiment.run.process import process_settings
    from helpers.experiment.run.quiet import silence_banners
    silence_banners()
    process_settings()                    # where this process starts: dynamo's cap for every compiled Round

    from helpers.artifacts import atomic_write, save_json
    from helpers.measure.machine import machine

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: run with --device cpu --quick for the CPU check", file=sys.stderr)
        return 2
    if args.quick:
        args.frames, args.iters, args.sizes = min(args.frames, 3), min(args.iters, 3), args.sizes[:2]
    device = torch.device(args.device)
    modes = ["none", "cuda_graph", "inductor_graph"] if device.type == "cuda" else ["none"]
    start = time.perf_counter()
    recorded = {k: _shown(v) if k in ("out", "pack") else v for k, v in vars(args).items()}
    out = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "machine": machine(), "args": recorded, "errors": {}}
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)

    def save():                                       # after every step: a later failure loses nothing
        out["seconds"] = time.perf_counter() - start
        save_json(outdir / f"{args.name}.json", out)

    parts = {"mini": ("miniature", lambda: mini_part(args, device, modes, out, save)),
             "full": ("real size", lambda: full_part(args, device, modes, out, save)),
             "real": ("0.6B shape", lambda: real_part(args, device, modes, out, start + args.budget, save)),
             "exact": ("exactness", lambda: exact_part(args, device, modes, out, save))}
    for name, part in (parts[key] for key in args.parts):
        try:
            part()
        except Exception as err:                      # noqa: BLE001: every part is recorded, the command fails
            import traceback
            traceback.print_exc()
            out["errors"][name] = f"{type(err).__name__}: {err}"
        save()
    text = markdown(out)
    atomic_write(outdir / f"{args.name}.md", lambda path: path.write_text(text))
    print(f"saved {outdir / args.name}.json and .md ({out['seconds']:.0f} s)")
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
