"""The quick variant's extraction end to end in one command, by default on CUDA in bf16 (needs hub access):

    python scripts/qwen3_quick_cuda.py [--params params/qwen3-tts-0.6b-quick.yaml] [--out DIR]
                                       [--device cuda|cpu] [--dtype bfloat16|float32|...] [KEY=VALUE ...]

Loads Qwen3-TTS-12Hz-0.6B-CustomVoice, streams VoxPopuli and LibriSpeech, encodes the audio with the speech
tokenizer, teacher-forces train / validation / calibration and merges them into DIR (default
outputs/<run>/extraction); then, as a first look, trains the position offsets on train, prints the
held-out acceptance a[d][0] beside reused heads and the expected tokens/step of the calibrated tree, and writes
DIR/quick_look.json. --device and --dtype set the model's device and dtype (the params file's are replaced);
on a CPU the same body runs (the tests run it on a tiny checkpoint).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from helpers.artifacts import load_json, load_tensors, save_json  # noqa: E402
from helpers.method.calibration import acceptance_table, expected_tokens_per_step, greedy_tree, uncapped_table  # noqa: E402
from helpers.method.drafters import PositionOffsets, ReusedHeads  # noqa: E402
from helpers.experiment.run.backend_factory import load_backend  # noqa: E402
from helpers.experiment.run.params import CHOICES, load_params, parse_override  # noqa: E402
from helpers.experiment.stages.shards import extract_shard, merge_shards  # noqa: E402
from helpers.method.training import TrainConfig, train_drafter  # noqa: E402

ROLES = ("train", "validation", "calibration")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default=str(ROOT / "params" / "qwen3-tts-0.6b-quick.yaml"))
    parser.add_argument("--out", help="folder for the extraction (default: outputs/<run>/extraction)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="where the model runs (default cuda)")
    parser.add_argument("--dtype", default="bfloat16", choices=CHOICES["dtype"], help="the model's dtype (default bfloat16)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    overrides = dict(parse_override(x) for x in args.overrides)
    if {"device", "dtype"} & set(overrides):
        parser.error(f"set the device and dtype with --device and --dtype, not as KEY=VALUE (got {args.overrides})")
    if args.device == "cuda" and not torch.cuda.is_available():
        from helpers.backends.qwen3.backend import cuda_unavailable_reason
        sys.exit("qwen3_quick_cuda: --device cuda was asked for, but CUDA is not available here "
                 f"(torch.cuda.is_available() is False: {cuda_unavailable_reason()}); use --device cpu to run the "
                 "same body on the CPU.")
    P = load_params(args.params, {**overrides, "device": args.device, "dtype": args.dtype,
                                  "shard_index": 0, "num_shards": 1})
    out = Path(args.out) if args.out else P.run_dir / "extraction"
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    start = time.perf_counter()
    backend = load_backend(P)
    timings = {"load": time.perf_counter() - start}
    print(f"loaded {P.model_id_or_path} on {device_name} in {args.dtype} in {timings['load']:.1f} s")
    table = []
    for role in ROLES:
        t = time.perf_counter()
        extract_shard(backend, role, out, batch_size=P.extraction_batch_size)
        merge_shards(out, role, 1)
        timings[role] = time.perf_counter() - t
        meta, tensors = load_json(out / f"{role}.json"), load_tensors(out / f"{role}.safetensors")
        table.append(dict(stage=role, dataset=backend.dataset_name(role), samples=len(meta["ids"]),
                          hours=sum(meta["seconds"]) / 3600, frames=int(tensors["frames"].sum())))
        print(f"{role:12s} {table[-1]['samples']:5d} utterances {table[-1]['hours']:6.2f} h "
              f"{table[-1]['frames']:7d} frames  {timings[role]:7.1f} s  ({table[-1]['dataset']})")

    predictor = backend.predictor

    def hidden(role):
        data = load_tensors(out / f"{role}.safetensors")
        g, codes = data["g"].to(predictor.device, predictor.dtype), data["codes"].to(predictor.device)
        return predictor.teacher_forced_hidden(g, codes), codes

    t = time.perf_counter()
    offsets = PositionOffsets(predictor, depth=P.depth)
    train_drafter(offsets, *hidden("train"), TrainConfig(P.drafter_epochs, P.drafter_lr, P.drafter_batch_size, P.seed))
    look = {}
    for name, drafter in (("reused", ReusedHeads(predictor, P.depth)), ("offsets", offsets)):
        a_cal = uncapped_table(drafter, *hidden("calibration"), P.tree_size, P.acceptance_width)   # never caps the tree
        a_val = acceptance_table(drafter, *hidden("validation"), width=a_cal.shape[1])
        tree = greedy_tree(a_cal, P.tree_size)
        look[name] = dict(validation_top1=[round(float(x), 4) for x in a_val[:, 0]],
                          expected_tokens_per_step=expected_tokens_per_step(tree, a_val))
        print(f"{name:8s} held-out a[d][0] = {look[name]['validation_top1']}  expected tokens/step at "
              f"N = {P.tree_size}: {look[name]['expected_tokens_per_step']:.2f}")
    timings["offsets"] = time.perf_counter() - t
    save_json(out / "quick_look.json", dict(params=P.to_dict(), table=table, timings_s=timings, acceptance=look,
                                            device=device_name, torch=torch.__version__))
    print(f"wrote {out}/quick_look.json; total {sum(timings.values()):.1f} s")


if __name__ == "__main__":
    main()
