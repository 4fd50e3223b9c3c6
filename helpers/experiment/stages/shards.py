"""Scale-out: each process extracts its own contiguous block of a role's utterances; a merge step joins the blocks
in shard order, so the merged artifact is the one a single process writes.

    python -m helpers.experiment.stages.shards extract --params params/qwen3-tts-0.6b.yaml --out DIR train validation
    torchrun --nproc-per-node 8 -m helpers.experiment.stages.shards extract --params ... --out DIR train
                                                                            # one block per GPU
    python -m helpers.experiment.stages.shards merge --out DIR --num-shards 8 train

A shard is `DIR/<name>-shard-<i>-of-<n>.json` (lists per utterance: ids, languages, ...) plus `.safetensors`
(g [F, H_talker], codes [F, 16], frames [utterances]). Merging concatenates lists and tensors; it refuses while a
shard is missing. Under `torchrun` / `accelerate launch` the shard is the process's RANK of WORLD_SIZE (and its GPU
is LOCAL_RANK) unless the params set num_shards.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from helpers.artifacts import load_json, load_tensors, save_json, save_tensors
from helpers.experiment.run.params import load_params, parse_override
from helpers.experiment.run.backend_factory import load_backend


def shard_of(items: list, shard_index: int, num_shards: int) -> list:
    """The shard's contiguous block of items (sizes differ by at most one, earlier shards larger)."""
    if not 0 <= shard_index < num_shards:
        raise ValueError(f"shard_index={shard_index} must be in 0..{num_shards - 1}")
    size, extra = divmod(len(items), num_shards)
    start = shard_index * size + min(shard_index, extra)
    return items[start:start + size + (shard_index < extra)]


def launcher_shard(P) -> tuple[int, int]:
    """(shard_index, num_shards): the params', or RANK / WORLD_SIZE under a launcher when the params say 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if P.num_shards == 1 and world > 1:
        return int(os.environ["RANK"]), world
    return P.shard_index, P.num_shards


def shard_stem(folder, name: str, shard_index: int, num_shards: int) -> Path:
    return Path(folder) / f"{name}-shard-{shard_index}-of-{num_shards}"


def extract_shard(backend, role: str, folder, shard_index: int = 0, num_shards: int = 1, batch_size: int = 16) -> Path:
    """Teacher-forced g [F, H_talker] and codes [F, 16] of this shard's utterances of `role`."""
    records = backend.records(role)
    samples = backend.encode(shard_of(records, shard_index, num_shards))
    if not samples:
        raise ValueError(f"shard {shard_index} of {num_shards} has no {role} utterances ({len(records)} in all); "
                         "use fewer shards")
    g, codes = backend.teacher_forced(samples, batch_size=batch_size)
    stem = shard_stem(folder, role, shard_index, num_shards)
    save_tensors(stem.with_suffix(".safetensors"),
                 {"g": g, "codes": codes, "frames": torch.tensor([s.codes.shape[0] for s in samples])})
    save_json(stem.with_suffix(".json"), {"ids": [s.id for s in samples], "langs": [s.lang for s in samples],
                                          "seconds": [s.seconds for s in samples]})
    return stem


def merge_shards(folder, name: str, num_shards: int) -> Path:
    """Join `name`'s shards into DIR/<name>.json (and .safetensors where the shards have tensors)."""
    stems = [shard_stem(folder, name, i, num_shards) for i in range(num_shards)]
    missing = [str(s.with_suffix(".json")) for s in stems if not s.with_suffix(".json").is_file()]
    if missing:
        raise FileNotFoundError(f"cannot merge {name}: {len(missing)} of {num_shards} shards missing: {missing}")
    parts = [load_json(s.with_suffix(".json")) for s in stems]
    save_json(Path(folder) / f"{name}.json", {k: [x for p in parts for x in p[k]] for k in parts[0]})
    tensors = [s.with_suffix(".safetensors") for s in stems]
    if any(t.is_file() for t in tensors):
        loaded = [load_tensors(t) for t in tensors]
        save_tensors(Path(folder) / f"{name}.safetensors", {k: torch.cat([t[k] for t in loaded]) for k in loaded[0]})
    return Path(folder) / name


def main(argv=None) -> None:

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("extract", "merge"))
    parser.add_argument("roles", nargs="+", help="train, validation, calibration, evaluation (names, for merge)")
    parser.add_argument("--out", required=True, help="folder of the shards and merged artifacts")
    parser.add_argument("--params", help="a params YAML (extract)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a parameter")
    parser.add_argument("--num-shards", type=int, default=1, help="shards to merge (merge)")
    args = parser.parse_args(argv)
    if args.command == "merge":
        for name in args.roles:
            print(f"merged {merge_shards(args.out, name, args.num_shards)}")
        return
    P = load_params(args.params, dict(parse_override(x) for x in args.set))
    index, num = launcher_shard(P)
    if "LOCAL_RANK" in os.environ and P.device in ("cuda", "auto") and torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    backend = load_backend(P)
    for role in args.roles:
        print(f"extracted {extract_shard(backend, role, args.out, index, num, P.extraction_batch_size)}")


if __name__ == "__main__":
    main()
