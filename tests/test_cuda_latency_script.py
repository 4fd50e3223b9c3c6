"""scripts/cuda_latency.py runs on the CPU at the 0.6B code predictor's shape (its documented check that it runs
here): the per-call sweep, its table's arithmetic and the whole-frame comparison, saved as JSON."""

import json
import subprocess
import sys

import pytest

from helpers.experiment.run.params import REPO_ROOT
from helpers.method.calibration import REFERENCE_TABLE, expected_tokens_per_step, greedy_tree


def test_the_cpu_check_of_the_latency_script(tmp_path):
    out = tmp_path / "latency.json"
    result = subprocess.run([sys.executable, "scripts/cuda_latency.py", "--device", "cpu", "--iters", "2",
                             "--warmup", "1", "--frames", "1", "--sizes", "4", "--threads", "1", "--out", str(out)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning: shape differs" not in result.stdout            # the shape is the qwen_tts defaults'
    saved = json.loads(out.read_text())
    table = saved["eager"]["table"]
    row = table["by_n"]["4"]
    assert row["q"] == 5 and table["best_n"] == 4
    assert row["overhead"] == pytest.approx(row["call_ms_p50"] / table["ar"]["call_ms_p50"] - 1)
    assert row["realised_speedup"] == pytest.approx(row["tokens_per_step"] / (1 + row["overhead"]))
    assert row["tokens_per_step"] == pytest.approx(expected_tokens_per_step(greedy_tree(REFERENCE_TABLE, 4),
                                                                            REFERENCE_TABLE))
    assert "cuda_graph" not in saved                                   # no graphs on the CPU
    loop = saved["inner_loop_ar_vs_official"]
    assert loop["frames"] == 1 and loop["ar_over_official"] == pytest.approx(loop["official_ms"] / loop["ar_ms"])
