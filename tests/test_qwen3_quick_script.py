"""scripts/qwen3_quick_cuda.py: its clear refusals, and its whole body on the CPU with the shipped quick params file
pointed at the tiny saved checkpoint and local datasets (tests/qwen3_tiny.py)."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers.artifacts import load_json, load_tensors
from helpers.method.calibration import acceptance_table
from helpers.method.drafters import ReusedHeads
from qwen3_tiny import tiny_params

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "qwen3_quick_cuda.py"
# The tiny stand-ins in place of the hub ids, few utterances, a small tree; the rest is params/qwen3-tts-0.6b-quick.yaml
TINY_KEYS = ("model_id_or_path", "whisper_id", "voxpopuli_id", "librispeech_id", "fleurs_id", "voxpopuli_revision",
             "voxpopuli_data_dir", "fleurs_revision", "fleurs_data_dir", "languages", "train_samples",
             "validation_samples", "calibration_samples", "extraction_batch_size", "tree_sizes", "tree_size")
ROLES = {"train": "voxpopuli", "validation": "voxpopuli", "calibration": "librispeech"}


def script():
    spec = importlib.util.spec_from_file_location("qwen3_quick_cuda", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message where there is no CUDA")
def test_refuses_cuda_where_there_is_none():
    with pytest.raises(SystemExit, match="--device cuda was asked for, but CUDA is not available here.*--device cpu"):
        script().main([])


def test_device_and_dtype_are_options_not_overrides(capsys):
    with pytest.raises(SystemExit):
        script().main(["--device", "cpu", "dtype=float32"])
    assert "set the device and dtype with --device and --dtype, not as KEY=VALUE" in capsys.readouterr().err


def test_runs_the_quick_extraction_and_first_look_on_the_cpu(qwen3_tiny, backend, tmp_path):
    """The command as on a GPU, with --device cpu. float64, not the default bf16: bf16 runs on the CPU too, but
    the talker in float64 is the `backend` fixture's, so the extracted codes and the reused heads' acceptance can be
    checked against that independent load."""
    tiny = tiny_params(qwen3_tiny).to_dict()
    overrides = [f"{key}={json.dumps(tiny[key])}" for key in TINY_KEYS] + ["depth=2"]
    out = tmp_path / "extraction"
    run = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--dtype", "float64", "--out", str(out),
                          *overrides], cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    printed = run.stdout
    assert re.search(rf"^loaded {re.escape(str(qwen3_tiny['tts']))} on cpu in float64 in ", printed, re.M)

    look = load_json(out / "quick_look.json")
    assert look["device"] == "cpu" and look["params"]["device"] == "cpu" and look["params"]["dtype"] == "float64"
    assert look["params"]["inner_loop_dtype"] == "float64" and look["params"]["depth"] == 2     # file, override
    hidden_size = backend.model.config.talker_config.hidden_size
    for row, (role, dataset) in zip(look["table"], ROLES.items()):
        meta, data = load_json(out / f"{role}.json"), load_tensors(out / f"{role}.safetensors")
        frames = int(data["frames"].sum())
        assert len(meta["ids"]) == len(data["frames"]) == tiny[f"{role}_samples"] and frames > 0
        assert data["codes"].shape == (frames, 16) and data["g"].shape == (frames, hidden_size)
        assert data["g"].dtype == torch.float64                        # --dtype, not the file's bfloat16
        assert row["stage"] == role and dataset in row["dataset"] and row["samples"] == len(meta["ids"])
        assert row["frames"] == frames and row["hours"] == pytest.approx(sum(meta["seconds"]) / 3600)
        assert re.search(rf"^{role}\s+{row['samples']} utterances\s+\S+ h\s+{frames} frames .*\(.*{dataset}.*\)$",
                         printed, re.M)
        g, codes = backend.teacher_forced(backend.samples(role), batch_size=tiny["extraction_batch_size"])
        # the quick file's sdpa attention against the fixture's eager one: ~5e-7 apart even in float64
        assert torch.equal(data["codes"], codes) and torch.allclose(data["g"], g, rtol=0, atol=1e-5)

    predictor = backend.predictor
    for name, result in look["acceptance"].items():
        top1 = result["validation_top1"]
        assert len(top1) == 2 and all(0 <= a <= 1 for a in top1)
        assert 1 <= result["expected_tokens_per_step"] <= 3              # at most depth + 1 codes per call
        assert f"{name:8s} held-out a[d][0] = {top1}  expected tokens/step at N = 16: " \
               f"{result['expected_tokens_per_step']:.2f}" in printed
    val = load_tensors(out / "validation.safetensors")
    a = acceptance_table(ReusedHeads(predictor, 2), predictor.teacher_forced_hidden(val["g"], val["codes"]),
                         val["codes"], width=1)
    assert look["acceptance"]["reused"]["validation_top1"] == [round(float(x), 4) for x in a[:, 0]]
    assert sorted(look["acceptance"]) == ["offsets", "reused"]
    assert f"wrote {out}/quick_look.json; total " in printed
