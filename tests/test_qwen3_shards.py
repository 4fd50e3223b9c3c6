"""Scale-out: two real processes (launched as torchrun would: RANK / WORLD_SIZE) extract their shards, the merge
equals what one process extracts; evaluation shards (`evaluate_shard`, written here over the evaluation stages'
synthesis and ASR, `qwen3_tiny.transcribed_runs`) merge to the single-process rows."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from drafting import TREES, random_drafters
from helpers.artifacts import load_json, load_tensors, save_json
from helpers.method.decoding import Decoder
from helpers.experiment.stages.quality import STREAM_STRIDE
from helpers.experiment.stages.shards import extract_shard, launcher_shard, main, merge_shards, shard_of, shard_stem
from helpers.method.sampler import SamplerConfig
from qwen3_tiny import tiny_params, transcribed_runs

ROOT = Path(__file__).resolve().parents[1]
ROLES = ("train", "calibration")


def evaluate_shard(backend, systems: dict, seeds: list[int], folder, shard_index: int = 0,
                   num_shards: int = 1, name: str = "evaluation", independent: bool = True) -> Path:
    """Free-running synthesis of this shard's evaluation utterances by every system and seed, with transcripts.

    systems: name -> decoder ("ar" or a `Decoder`). One row per (utterance, seed, system), made by the evaluation
    stages' synthesis and ASR (`qwen3_tiny.transcribed_runs`), written to DIR/<name>-shard-<i>-of-<n>.json.
    Utterance i of the role (its index over all shards) under seed s is synthesised with seed s + k * STREAM_STRIDE
    + i by the k-th system: independent random streams, as the paper compares systems (`independent=False`: every
    system on s + i, the same codes where decoding is lossless).
    """
    records = backend.records("evaluation")
    block = shard_of(list(range(len(records))), shard_index, num_shards)
    samples = backend.encode([records[i] for i in block])
    streams = {system: (k if independent else 0) * STREAM_STRIDE for k, system in enumerate(systems)}
    runs = {(seed, system): transcribed_runs(backend, samples, decoder, [seed + streams[system] + i for i in block])
            for seed in seeds for system, decoder in systems.items()}
    rows = []
    for i, s in zip(block, samples):                 # utterance order: the merged shards are one process's rows
        for (seed, system), done in runs.items():
            syn, hyp, seconds = done[block.index(i)]
            rows.append(dict(id=s.id, lang=s.lang, system=system, seed=seed,
                             synthesis_seed=seed + streams[system] + i, frames=len(syn.calls),
                             tokens=len(syn.calls) * (syn.codes.shape[1] - 1), calls=sum(syn.calls),
                             reference=s.text, transcript=hyp, audio_seconds=seconds))
    stem = shard_stem(folder, name, shard_index, num_shards)
    save_json(stem.with_suffix(".json"), {"rows": rows})
    return stem


def test_shard_blocks_cover_the_items_in_order(monkeypatch, qwen3_tiny):
    items = list(range(11))
    blocks = [shard_of(items, i, 3) for i in range(3)]
    assert [len(b) for b in blocks] == [4, 4, 3] and sum(blocks, []) == items
    assert shard_of(items[:1], 1, 2) == []
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    assert launcher_shard(tiny_params(qwen3_tiny)) == (2, 4)
    assert launcher_shard(tiny_params(qwen3_tiny, shard_index=1, num_shards=2)) == (1, 2)   # params win


def test_two_processes_extract_what_one_process_extracts(backend, qwen3_tiny, tmp_path):
    params = tmp_path / "tiny.yaml"
    params.write_text(yaml.safe_dump(tiny_params(qwen3_tiny).to_dict()))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": "2", "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "helpers.experiment.stages.shards", "extract", *ROLES,
                               "--params", str(params),
                               "--out", str(tmp_path / "sharded")], cwd=ROOT, env={**env, "RANK": str(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in range(2)]
    for role in ROLES:
        extract_shard(backend, role, tmp_path / "single")
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out
    with pytest.raises(FileNotFoundError, match="3 of 3 shards missing.*train-shard-0-of-3.json"):
        merge_shards(tmp_path / "sharded", "train", 3)
    main(["merge", *ROLES, "--out", str(tmp_path / "sharded"), "--num-shards", "2"])
    for role in ROLES:
        one, two = (load_tensors(tmp_path / d / f"{role}-shard-0-of-1.safetensors" if d == "single" else
                                 tmp_path / d / f"{role}.safetensors") for d in ("single", "sharded"))
        assert torch.equal(one["codes"], two["codes"]) and torch.equal(one["frames"], two["frames"])
        assert torch.allclose(one["g"], two["g"], rtol=0, atol=1e-12)          # batches differ: rounding only
        assert load_json(tmp_path / "single" / f"{role}-shard-0-of-1.json") == load_json(
            tmp_path / "sharded" / f"{role}.json")
    assert one["g"].shape == (int(one["frames"].sum()), backend.model.config.talker_config.hidden_size)


@pytest.mark.parametrize("independent", [True, False])
def test_evaluation_shards_merge_to_the_single_process_rows(backend, tmp_path, qwen3_params, independent):
    """Two shards merge to one process's rows. Independent streams (the paper's comparison): each system its own
    synthesis seeds; the same streams (independent=False): lossless decoding gives the AR codes, so the same audio."""
    P = qwen3_params
    decoder = Decoder(backend.predictor, SamplerConfig(P.top_k, P.top_p, P.temperature),
                      random_drafters(backend.predictor)["offsets"], TREES["sparse16"])
    systems, seeds = {"ar": "ar", "offsets": decoder}, [5]
    for i in range(2):
        evaluate_shard(backend, systems, seeds, tmp_path, i, 2, independent=independent)
    merge_shards(tmp_path, "evaluation", 2)
    rows = load_json(tmp_path / "evaluation.json")["rows"]
    single = evaluate_shard(backend, systems, seeds, tmp_path / "one", independent=independent)
    assert rows == load_json(single.with_suffix(".json"))["rows"]
    assert [(r["lang"], r["system"], r["seed"]) for r in rows] == [
        ("en", "ar", 5), ("en", "offsets", 5), ("ja", "ar", 5), ("ja", "offsets", 5)]
    stream = STREAM_STRIDE if independent else 0
    assert [r["synthesis_seed"] for r in rows] == [5, 5 + stream, 6, 6 + stream]
    for ar, spec in (rows[:2], rows[2:]):
        assert ar["audio_seconds"] > 0 and ar["calls"] == 15 * ar["frames"] and spec["calls"] < 15 * spec["frames"]
        if not independent:                       # same codes, so the same audio and transcript
            assert ar["transcript"] == spec["transcript"] and ar["frames"] == spec["frames"]
