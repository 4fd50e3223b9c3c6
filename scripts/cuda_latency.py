"""Latency sweep on a model of the real Qwen3-TTS-12Hz-0.6B code predictor's shape (random weights).

Per-call p10/p50/p90 of the fused call at q = 1 and q = N + 1 (N in 4, 8, 16, 32, 64), eager and
replayed from a captured CUDA graph, then overhead and the speedup each N would realise at the
paper's tokens/step ceilings (16: 2.25, 32: 2.47, 64: 2.60) and at the tokens/step a made-up
acceptance table predicts; plus whole frames of our AR loop vs the official `code_predictor.generate`.
Random weights are fine for timing (not for acceptance: tokens/step comes from the tables above).

    python scripts/cuda_latency.py                      # CUDA, bf16, 200 calls after 20 warm-ups
    python scripts/cuda_latency.py --device cpu --iters 5 --warmup 1 --frames 2   # check it runs here
    python scripts/cuda_latency.py --device cpu --iters 5 --warmup 1 --frames 0 --no-sweep \
        --side-by-side inductor --side-frames 5 --sizes 4     # eager vs compiled whole frames on this CPU

--side-by-side MODE: whole frames of the official generate, our AR and speculative loops eager and compiled
(`helpers.measure.compiled_latency.side_by_side`; cuda_graph: `cuda_graph_comparison`). With random weights the
drafts are rarely accepted (tokens/step near 1): the rows compare what a call and a round cost.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.experiment.run.process import process_settings  # noqa: E402
from helpers.method.compiler import COMPILE_MODES  # noqa: E402
from helpers.measure.speedup import formula  # noqa: E402
from helpers.method.calibration import REFERENCE_TABLE, expected_tokens_per_step, greedy_tree  # noqa: E402
from helpers.method.predictor import CodePredictor  # noqa: E402
from helpers.method.drafters import PositionOffsets  # noqa: E402
from helpers.artifacts import save_json  # noqa: E402
from helpers.measure.latency import (SIZES, call_sweep, format_table, frame_latency,  # noqa: E402
                                     latency_table)
from helpers.measure.machine import machine  # noqa: E402
from helpers.measure.compiled_latency import format_side_by_side, side_by_side  # noqa: E402
from helpers.method.sampler import frame_uniforms  # noqa: E402
from helpers.adapter.tiny import QWEN3_TTS_0_6B, build_tiny_talker, random_frame_inputs  # noqa: E402

# Qwen3-TTS-12Hz-0.6B: code predictor hidden 1024, 5 layers, 16 heads, 8 kv heads, head_dim 128,
# intermediate 3072, vocab 2048 (the defaults of qwen_tts's Qwen3TTSTalkerCodePredictorConfig);
# talker hidden 1024, codec vocab 3072 (Qwen3TTSTalkerConfig defaults); 16 code groups.
REAL_SHAPE = QWEN3_TTS_0_6B                 # the 0.6B code predictor's exact shape (checked against its config below)
PAPER_CEILING = {16: 2.25, 32: 2.47, 64: 2.60}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def check_shape_against_qwen_tts_defaults() -> list[str]:
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSTalkerCodePredictorConfig, Qwen3TTSTalkerConfig
    cp, talker = Qwen3TTSTalkerCodePredictorConfig(), Qwen3TTSTalkerConfig()
    want = {"hidden_size": (cp.hidden_size, REAL_SHAPE.hidden_size),
            "num_hidden_layers": (cp.num_hidden_layers, REAL_SHAPE.num_layers),
            "num_attention_heads": (cp.num_attention_heads, REAL_SHAPE.num_heads),
            "num_key_value_heads": (cp.num_key_value_heads, REAL_SHAPE.num_kv_heads),
            "head_dim": (cp.head_dim, REAL_SHAPE.head_dim),
            "intermediate_size": (cp.intermediate_size, REAL_SHAPE.intermediate_size),
            "vocab_size": (cp.vocab_size, REAL_SHAPE.vocab_size),
            "talker hidden_size": (talker.hidden_size, REAL_SHAPE.talker_hidden_size),
            "talker vocab_size": (talker.vocab_size, REAL_SHAPE.talker_vocab_size)}
    return [f"{k}: qwen_tts default {a}, ours {b}" for k, (a, b) in want.items() if a != b]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default=None, choices=list(DTYPES), help="default: bf16 on CUDA, fp32 on CPU")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--frames", type=int, default=20, help="frames for AR loop vs official generate (0: skip)")
    ap.add_argument("--no-graphs", action="store_true", help="skip the CUDA-graph sweep")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--no-sweep", action="store_true", help="skip the per-call sweeps")
    ap.add_argument("--side-by-side", default=None, choices=list(COMPILE_MODES),
                    help="whole frames eager vs compiled in MODE (see above)")
    ap.add_argument("--side-frames", type=int, default=20)
    ap.add_argument("--out", default=None, help="JSON path (default outputs/bench/latency_0.6b_<device>.json)")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: this script measures the GPU sweep. "
                         "Run with --device cpu (and small --iters) to check it works on this machine.")
    process_settings(args.threads or None)   # where this process starts (helpers.experiment.run.process)
    dtype = DTYPES[args.dtype or ("bf16" if args.device == "cuda" else "fp32")]
    mismatch = check_shape_against_qwen_tts_defaults()
    if mismatch:
        print("warning: shape differs from qwen_tts defaults:\n  " + "\n  ".join(mismatch))
    start = time.perf_counter()
    talker = build_tiny_talker(REAL_SHAPE, seed=0, dtype=dtype).to(args.device)
    predictor = CodePredictor.from_talker(talker)
    params = sum(p.numel() for p in talker.code_predictor.parameters())
    print(f"0.6B-shaped code predictor, random weights: {params / 1e6:.1f}M parameters, {dtype}, {args.device} "
          f"({time.perf_counter() - start:.1f}s to build)", flush=True)
    drafter = PositionOffsets(predictor)
    trees = {n: greedy_tree(REFERENCE_TABLE, n) for n in args.sizes}
    expected = {n: expected_tokens_per_step(tree, REFERENCE_TABLE) for n, tree in trees.items()}
    results = {"model": "qwen3-tts-0.6b-shape-random", "dtype": str(dtype), "environment": machine(),
               "args": vars(args), "expected_tokens_per_step": expected, "paper_ceiling": PAPER_CEILING}
    modes = [] if args.no_sweep else [False] + ([True] if args.device == "cuda" and not args.no_graphs else [])
    for graphs in modes:
        label = "cuda graph" if graphs else "eager"
        sweep = call_sweep(predictor, drafter, trees, args.warmup, args.iters, cuda_graph=graphs)
        table = latency_table(sweep, tokens_per_step=expected)
        for n, row in table["by_n"].items():
            row["realised_at_paper_ceiling"] = (formula(PAPER_CEILING[n], 1 + row["overhead"])
                                                if n in PAPER_CEILING else None)
        print(f"\n[{label}] tokens/step from a reference acceptance table (not this random model)")
        print(format_table(table))
        print("speedup at the paper's tokens/step: " + ", ".join(
            f"N={n}: {r['realised_at_paper_ceiling']:.2f}" for n, r in table["by_n"].items()
            if r["realised_at_paper_ceiling"]))
        results["cuda_graph" if graphs else "eager"] = {"sweep": sweep, "table": table}
    if args.frames:
        gen = torch.Generator().manual_seed(1)
        g, c0 = random_frame_inputs(REAL_SHAPE.talker_hidden_size, REAL_SHAPE.talker_vocab_size, args.frames, gen,
                                    dtype)
        u = frame_uniforms(gen, batch=args.frames)
        loop = frame_latency(predictor, drafter, {}, g.to(args.device), c0.to(args.device), u.to(args.device),
                          warmup_frames=1)
        print(f"\nwhole frames: our AR loop {loop['ar_ms']:.2f} ms, official generate {loop['official_ms']:.2f} ms "
              f"(official / ours {loop['ar_over_official']:.2f})")
        results["inner_loop_ar_vs_official"] = loop
    if args.side_by_side:
        gen = torch.Generator().manual_seed(2)
        g, c0 = random_frame_inputs(REAL_SHAPE.talker_hidden_size, REAL_SHAPE.talker_vocab_size, args.side_frames,
                                    gen, dtype)
        u = frame_uniforms(gen, batch=args.side_frames, device=args.device)
        side = side_by_side(predictor, drafter, trees, g.to(args.device), c0.to(args.device), u,
                            compile_mode=args.side_by_side, warmup_frames=1)
        print(f"\nside by side ({args.side_by_side}), {args.side_frames} frames:")
        print(format_side_by_side(side))
        results["side_by_side"] = side
    out = args.out or f"outputs/bench/latency_0.6b_{args.device}.json"
    print(f"saved {save_json(out, results)} ({time.perf_counter() - start:.0f}s in all)")
    return results


if __name__ == "__main__":
    main()
