"""The whole notebook sequence (`python -m helpers PARAMS`) on the qwen3 backend with the model in bf16 on CPU
(tiny saved checkpoint, local datasets, tiny Whisper): it completes through 07 (Core ML from a CPU float32 copy)
and 08's report. With the inner loop in bf16 the report states the identical fraction and the per-position parity
test; with it in float64 (beside the bf16 talker) every frame is identical, as notebook 04 asserts. One evaluation
utterance per system cannot power the independent-stream parity test's control: 08 stops on that alone."""

import json
import subprocess
import sys

import pytest
import yaml

from helpers.experiment.run.metrics import missing_keys, required_keys
from helpers.experiment.run.params import REPO_ROOT, load_params
from qwen3_tiny import tiny_params


@pytest.fixture(scope="module")
def params_file(qwen3_tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("sequence")
    P = tiny_params(qwen3_tiny, output_dir=str(root / "outputs"), cache_dir=str(root / "cache"), dtype="bfloat16",
                    languages=["en"], drafters=["reused", "offsets"], tree_sizes=[4], tree_size=4, wer_seeds=1,
                    ceiling_frames=2, audio_examples=1, latency_tree_sizes=[4], latency_calls=2, latency_warmup=1,
                    latency_frames=2, coreml_tree_size=4)
    path = root / "qwen3-tiny-bf16.yaml"
    path.write_text(yaml.safe_dump(P.to_dict()))
    return path


@pytest.mark.parametrize("inner, exact", [("same", False), ("float64", True)])
def test_the_sequence_runs_in_bf16_and_reports_losslessness(params_file, inner, exact):
    name = f"bf16-inner-{inner}"
    result = subprocess.run([sys.executable, "-m", "helpers", str(params_file), "-p", f"run_name={name}",
                             "-p", f"inner_loop_dtype={inner}"], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=1200)
    if result.returncode:          # one utterance per system cannot power the parity control: 08 must say only that
        said = result.stdout + result.stderr
        stopped = said.split("the run is not complete:")[-1].split("partial output:")[0]
        problems = [line.strip() for line in stopped.splitlines() if line.strip()]
        assert "08_report ... FAILED" in said and len(problems) == 1, said[-3000:]
        assert problems[0].startswith("the parity test's control (temperature 1.2) is not rejected"), problems
    P = load_params(params_file, {"run_name": name, "inner_loop_dtype": inner})
    metrics = json.loads((P.run_dir / "metrics.json").read_text())
    assert missing_keys(metrics, required_keys(P)) == []
    lo = metrics["lossless"]
    assert lo["exact"] is exact and lo["inner_loop_dtype"] == ("float64" if exact else "bfloat16")
    assert lo["frames_compared"] > 0 and len(lo["parity"]["p_values"]) == 16
    assert lo["identical_fraction"] == lo["frames_identical"] / lo["frames_compared"]
    assert metrics["latency"]["cpu"]["dtype"] == "torch.bfloat16"                  # 06 times the run's own dtype
    assert {"ar_fp16", "fused_n4_fp16"} <= set(metrics["coreml"])                   # 07 exported a float32 copy
    en = metrics["languages"]["en"]
    assert 0.0 <= en["parity_p"] <= 1.0 and en["per_ar"] is None and len(metrics["parity"]["p_values"]) == 16
    report = (P.run_dir / "report.md").read_text()
    assert f"of {lo['frames_compared']:,} frames identical" in report
    if exact and lo["frames_identical"] == lo["frames_compared"]:   # identical streams: a chi-square could not fail
        assert "No per-position chi-square here" in report and "Parity test per code position" not in report
    else:
        assert "Parity test per code position" in report
    assert "beside a bfloat16 talker" in report
    if exact:
        assert lo["frames_identical"] == lo["frames_compared"]
        assert "full equality" in report and lo["replay_mismatched"] == 0
    else:
        assert "deployment mode" in report and not lo["parity"]["rejected"]
