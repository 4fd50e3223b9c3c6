"""The one prepared GPU check: one command, everything built on the spot (no hub access), one JSON + one Markdown.

    python scripts/gpu_check.py --out outputs/gpu_check                    # CUDA (H100/H200): at most ~8 minutes
    python scripts/gpu_check.py --device cpu --quick --out /tmp/gpu_check  # this CPU (tests/test_gpu_check.py)

Four parts, each recorded even when another fails (the script exits non-zero if any part failed):
(a) tests: tests/test_device_discipline.py with RVQ_TEST_DEVICE=cuda (the model on the GPU: teacher forcing,
    drafter training, calibration, AR and speculative synthesis through the official generate, replay, the
    evaluation stages, shards; speculative == AR codes in float64 on the device) and the CUDA cases of
    tests/test_code_predictor.py (float32 / bfloat16 on CUDA track float64). --quick on the CPU: the checker's
    own test on the lazy device.
(b) the notebook sequence (`python -m helpers PARAMS`) on the tiny saved Qwen3-TTS checkpoint of tests/qwen3_tiny.py
    in bfloat16 on the device (notebook 06 with `cuda_graph: auto`: graph-captured call sweep and compiled section
    on CUDA; the part fails unless metrics.json says graphs were on for the CUDA model) (bf16 inner loop: the report states the identical fraction and the parity test,
    notebook 08 passes when it does not reject), then with a float64 inner loop (`-p inner_loop_dtype=float64`:
    every frame identical). --quick: notebook 04 only, float64, CPU.
(c) latency of the 0.6B-shaped code predictor (random weights, scripts/cuda_latency.py's model): p50 per call at
    q = 1 and q = N + 1 for N in 4, 8, 15, 16, 31, 32, 47, 63, 64, eager and CUDA-graph captured, 200 calls after 20 warm-ups;
    whole frames, our AR loop vs the speculative decoder per N (greedy trees of a reference acceptance table;
    random weights accept little, so frame times, not speedups, are the point); and float32 against bfloat16 per N,
    interleaved (`measure.deployments.call_grid`, the table `make bench` records for a CPU's kernels).
    --quick: 3 calls, 1 frame, no graphs.
(d) whole frames of the same model: eager AR and speculative loops (N = 4, 8, 16) against their CUDA-graph captured
    versions and the official generate (`helpers.measure.compiled_latency.cuda_graph_comparison`), codes checked
    equal. --quick: the same harness with compilation off, one frame.

Not yet run on a GPU (no GPU was lent to this work). Measured here, 2-core shared CPU, `--device cpu --quick`,
44 s in all (tests 10 s, sequence 20 s, latency 14 s); (a) 1 passed on the lazy device; (b) notebook 04
on the tiny checkpoint, float64: rc 0, 46 / 46 frames identical; (c) float32, 3 calls after 1 warm-up: AR call
p50 19.2 ms, N = 4 / 8 / 16 / 32 / 64 at 56.3 / 68.5 / 88.9 / 119.0 / 176.6 ms (overhead 1.93 ... 8.20: this CPU
is compute-bound, see docs/speed.md); one frame AR 317 ms, speculative 721 (N = 4) ... 1825 ms (N = 64), codes equal.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

from helpers.artifacts import atomic_write, save_json  # noqa: E402
from helpers.experiment.run.process import process_settings  # noqa: E402

SIZES = (4, 8, 15, 16, 31, 32, 47, 63, 64)      # the paper's N and N + 1 = 16, 32, 48, 64


def _run(cmd: list[str], env: dict, log: Path, timeout: int) -> dict:
    """A subprocess with its output in `log`: {"cmd", "rc", "seconds", "tail"}."""
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1", **env}, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        rc, text = done.returncode, done.stdout
    except subprocess.TimeoutExpired as err:
        rc, text = 124, (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
    log.write_text(text)
    lines = [x for x in text.splitlines() if x.strip()]
    return {"cmd": " ".join(cmd), "rc": rc, "seconds": round(time.perf_counter() - start, 1), "log": str(log),
            "tail": lines[-1] if lines else ""}


def part_tests(device: str, quick: bool, out: Path) -> dict:
    if quick:
        tests = ["tests/test_device_discipline.py::test_checker_refuses_cpu_tensors_meeting_the_model"]
    else:
        tests = ["tests/test_device_discipline.py", "tests/test_code_predictor.py::test_lower_precision_and_devices_track_float64"]
    env = {"RVQ_TEST_DEVICE": "cuda" if device == "cuda" else "lazy"}
    result = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], env, out / "tests.log",
                  timeout=300)
    return {**result, "test_device": env["RVQ_TEST_DEVICE"], "ok": result["rc"] == 0}


def tiny_run_params(root: Path, quick: bool) -> Path:
    """The tiny saved checkpoint, Whisper and datasets (tests/qwen3_tiny.py) and a params YAML naming them."""
    from qwen3_tiny import build_tiny_datasets, build_tiny_tts, build_tiny_whisper, tiny_params
    import yaml

    paths = dict(tts=build_tiny_tts(root / "tts"), whisper=build_tiny_whisper(root / "whisper"),
                 **build_tiny_datasets(root / "data"))
    sizes = dict(languages=["en"], train_samples=4, validation_samples=2, calibration_samples=1, tree_sizes=[4],
                 tree_size=4, ceiling_frames=1, wer_seeds=1, drafter_epochs=1, latency_calls=3, latency_warmup=1,
                 latency_frames=2, latency_tree_sizes=[4]) if quick else {}
    P = tiny_params(paths, output_dir=str(root / "outputs"), **sizes)
    path = root / "qwen3-tiny.yaml"
    path.write_text(yaml.safe_dump(P.to_dict(), sort_keys=False))
    return path


def part_sequence(device: str, quick: bool, out: Path, root: Path) -> dict:
    """The tiny checkpoint's notebook sequence: bf16 with a bf16 inner loop (deployment: notebook 08 passes when the
    parity test does not reject) and bf16 with a float64 inner loop (exact: every frame identical)."""
    params = tiny_run_params(root, quick)
    runs = ({"float64": ["-p", "dtype=float64"]} if quick else
            {"bfloat16": ["-p", "dtype=bfloat16"],
             "bfloat16, float64 inner loop": ["-p", "dtype=bfloat16", "-p", "inner_loop_dtype=float64"]})
    result = {"params": str(params), "runs": {}}
    for i, (name, extra) in enumerate(runs.items()):
        cmd = [sys.executable, "-m", "helpers", str(params), *(["--only", "04"] if quick else []),
               "-p", f"device={device}", "-p", f"run_name=tiny-{i}", *extra]
        run = _run(cmd, {}, out / f"sequence-{i}.log", timeout=240 if quick else 420)
        metrics = root / "outputs" / f"tiny-{i}" / "metrics.json"
        m = json.loads(metrics.read_text()) if metrics.is_file() else {}
        lossless = m.get("lossless")
        exact_ok = bool(lossless) and (not lossless.get("exact") or
                                       lossless["frames_identical"] == lossless["frames_compared"] > 0)
        # notebook 06 (cuda_graph: auto): CUDA graphs on for a CUDA model, off on the CPU (absent: 06 did not run)
        graphs = {dev: lat.get("cuda_graph") for dev, lat in m.get("latency", {}).items()}
        graphs_ok = quick or (bool(graphs) and all(on == dev.startswith("cuda") for dev, on in graphs.items()))
        result["runs"][name] = {**run, "lossless": lossless, "latency_cuda_graph": graphs,
                                "ok": run["rc"] == 0 and exact_ok and graphs_ok}
    result["ok"] = all(r["ok"] for r in result["runs"].values())
    return result


@torch.no_grad()
def part_latency(device: str, quick: bool) -> dict:
    """Per-call p50 (q = 1 and q = N + 1) eager and graphed, and whole AR vs speculative frames, 0.6B shape."""
    from cuda_latency import REAL_SHAPE
    from helpers.adapter.tiny import build_tiny_talker, random_frame_inputs
    from helpers.measure.latency import call_sweep, frame_latency
    from helpers.method.calibration import REFERENCE_TABLE, greedy_tree
    from helpers.method.drafters import PositionOffsets
    from helpers.method.predictor import CodePredictor
    from helpers.method.sampler import frame_uniforms

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    warmup, iters, frames = (1, 3, 1) if quick else (20, 200, 20)
    talker = build_tiny_talker(REAL_SHAPE, seed=0, dtype=dtype).to(device)
    predictor = CodePredictor.from_talker(talker)
    drafter = PositionOffsets(predictor)
    trees = {n: greedy_tree(REFERENCE_TABLE, n) for n in SIZES}
    result = {"dtype": str(dtype)[6:], "warmup": warmup, "iters": iters, "frames": frames, "modes": {}}
    for graphs in [False] + ([True] if device == "cuda" and not quick else []):
        sweep = call_sweep(predictor, drafter, trees, warmup, iters, cuda_graph=graphs)
        result["modes"]["cuda graph" if graphs else "eager"] = {
            "ar_call_ms_p50": sweep["ar"]["p50"],
            "by_n": {n: {"q": r["q"], "call_ms_p50": r["call"]["p50"], "overhead": r["overhead"]}
                     for n, r in sweep["trees"].items()}}
    gen = torch.Generator().manual_seed(1)
    g, c0 = random_frame_inputs(REAL_SHAPE.talker_hidden_size, REAL_SHAPE.talker_vocab_size, frames, gen, dtype)
    u = frame_uniforms(gen, predictor.num_codes, batch=frames, device=device)
    loop = frame_latency(predictor, drafter, trees, g.to(device), c0.to(device), u, official=False,
                         warmup_frames=0 if quick else 2)
    result["frame_ms"] = {"ar": loop["ar_ms"], "speculative": {n: r["frame_ms"] for n, r in loop["trees"].items()}}
    # the dtypes side by side, as make bench records them on a CPU (the CPU kernels only where the device is a CPU)
    from helpers.measure.deployments import call_grid, deployed, runnable
    names = ["float32", "bfloat16"] + (runnable(["bfloat16-prepacked", "w8a16", "w8a8"])
                                       if device == "cpu" and not quick else [])
    systems = deployed(build_tiny_talker(REAL_SHAPE, seed=0, dtype=torch.float32), "reused", names=names, device=device)
    result["deployments"] = call_grid(systems, trees, warmup=1 if quick else 5, rounds=2 if quick else 40)
    result["identical"] = all(r["identical"] for r in loop["trees"].values())
    result["ok"] = result["identical"]
    return result


@torch.no_grad()
def part_compiled(device: str, quick: bool) -> dict:
    """Whole frames of the 0.6B-shaped code predictor: eager AR and speculative loops against their CUDA-graph
    captured versions (`measure.compiled_latency.cuda_graph_comparison`); on CPU (quick) the same harness with
    compilation off, to check the path."""
    from cuda_latency import REAL_SHAPE
    from helpers.adapter.tiny import build_tiny_talker, random_frame_inputs
    from helpers.measure.compiled_latency import cuda_graph_comparison, side_by_side
    from helpers.method.calibration import REFERENCE_TABLE, greedy_tree
    from helpers.method.drafters import PositionOffsets
    from helpers.method.predictor import CodePredictor
    from helpers.method.sampler import frame_uniforms

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    frames = 1 if quick else 30
    talker = build_tiny_talker(REAL_SHAPE, seed=0, dtype=dtype).to(device)
    predictor = CodePredictor.from_talker(talker)
    drafter = PositionOffsets(predictor)
    trees = {n: greedy_tree(REFERENCE_TABLE, n) for n in ((4,) if quick else (4, 8, 16))}
    g, c0 = random_frame_inputs(REAL_SHAPE.talker_hidden_size, REAL_SHAPE.talker_vocab_size, frames,
                                torch.Generator().manual_seed(2), dtype)
    if device == "cuda":
        result = cuda_graph_comparison(predictor, drafter, trees, g, c0)
    else:
        u = frame_uniforms(torch.Generator().manual_seed(0), predictor.num_codes, batch=frames, device=device)
        result = side_by_side(predictor, drafter, trees, g, c0, u, compile_mode="none", official=False, warmup_frames=0)
    rows = result["systems"]
    result["ok"] = all(r["identical"] == frames for name, r in rows.items() if name != "official")
    return result


def markdown(report: dict) -> str:
    lines = [f"# GPU check ({report['device']}{', quick' if report['quick'] else ''})", "",
             f"{report['environment']}; {report['seconds']:.0f} s in all; ok: {report['ok']}", ""]
    t = report["tests"]
    lines += ["## (a) tests", "", f"RVQ_TEST_DEVICE={t.get('test_device')}: rc {t.get('rc')}, {t.get('tail', t.get('error'))}", ""]
    s = report["sequence"]
    lines += ["## (b) notebook sequence, tiny Qwen3-TTS checkpoint", ""]
    if "note" in s:
        lines += [s["note"], ""]
    lines += ["| run | rc | seconds | frames identical / compared |", "|---|---|---|---|"]
    for name, r in s.get("runs", {}).items():
        ll = r["lossless"] or {}
        lines.append(f"| {name} | {r['rc']} | {r['seconds']} | {ll.get('frames_identical', '-')} / "
                     f"{ll.get('frames_compared', '-')} |")
    if "error" in s:
        lines.append(f"error: {s['error']}")
    lat = report["latency"]
    lines += ["", f"## (c) latency, 0.6B-shaped code predictor ({lat.get('dtype')}, random weights)", ""]
    for mode, m in lat.get("modes", {}).items():
        lines += [f"{mode}: AR call p50 {m['ar_call_ms_p50']:.3f} ms", "", "| N | q | call p50 ms | overhead |",
                  "|---|---|---|---|"]
        lines += [f"| {n} | {r['q']} | {r['call_ms_p50']:.3f} | {r['overhead']:.3f} |" for n, r in m["by_n"].items()]
        lines.append("")
    if "frame_ms" in lat:
        f = lat["frame_ms"]
        lines += [f"whole frames (median ms): AR {f['ar']:.2f}; speculative " + ", ".join(
            f"N={n} {v:.2f}" for n, v in f["speculative"].items()) + f"; speculative == AR: {lat['identical']}"]
    if "deployments" in lat:
        from helpers.measure.deployments import format_grid
        lines += ["", "dtypes side by side (interleaved, p50 ms and overhead):", "", "```",
                  format_grid(lat["deployments"]), "```"]
    if "error" in lat:
        lines.append(f"error: {lat['error']}")
    comp = report.get("compiled", {})
    lines += ["", "## (d) whole frames, eager vs CUDA-graph captured (0.6B shape)", ""]
    if "systems" in comp:
        from helpers.measure.compiled_latency import format_side_by_side
        lines += ["```", format_side_by_side(comp), "```"]
    if "error" in comp:
        lines.append(f"error: {comp['error']}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--quick", action="store_true", help="fewer calls and frames, no graphs, tiny sequence (CPU check)")
    ap.add_argument("--out", required=True, help="folder for gpu_check.json, gpu_check.md and the logs")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available here; use --device cpu --quick to check the script")
    process_settings()                    # where this process starts: dynamo's cap for every compiled Round
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    env = f"torch {torch.__version__}" + (f", {torch.cuda.get_device_name(0)}" if args.device == "cuda" else ", cpu")
    report = {"device": args.device, "quick": args.quick, "environment": env}
    with tempfile.TemporaryDirectory(prefix="gpu_check.") as tmp:
        for name, part in (("tests", lambda: part_tests(args.device, args.quick, out)),
                           ("sequence", lambda: part_sequence(args.device, args.quick, out, Path(tmp))),
                           ("latency", lambda: part_latency(args.device, args.quick)),
                           ("compiled", lambda: part_compiled(args.device, args.quick))):
            t0 = time.perf_counter()
            try:
                report[name] = part()
            except Exception as err:                      # recorded; the other parts still run
                report[name] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
            report[name]["part_seconds"] = round(time.perf_counter() - t0, 1)
            print(f"{name}: ok={report[name]['ok']} ({report[name]['part_seconds']} s)", flush=True)
            save_json(out / "gpu_check.json", report)     # finished work first
    report["seconds"] = time.perf_counter() - start
    report["ok"] = all(report[k]["ok"] for k in ("tests", "sequence", "latency", "compiled"))
    save_json(out / "gpu_check.json", report)
    atomic_write(out / "gpu_check.md", lambda p: p.write_text(markdown(report)))
    print(markdown(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
