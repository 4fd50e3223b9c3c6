"""scripts/gpu_check.py runs end to end here (`--device cpu --quick`) and writes what a GPU run reports."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SIZES = (4, 8, 15, 16, 31, 32, 47, 63, 64)   # the sweep: q = N + 1 for these N (the paper's and full tiles)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow                    # the whole script in a subprocess: 45 s alone on a fast CPU, minutes on a slow one
def test_gpu_check_quick_on_cpu(tmp_path):
    done = subprocess.run([sys.executable, "scripts/gpu_check.py", "--device", "cpu", "--quick", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)   # a hang guard: minutes on a slow CPU
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["ok"] and report["device"] == "cpu" and report["quick"]
    assert report["tests"]["test_device"] == "lazy" and report["tests"]["rc"] == 0
    (run,) = report["sequence"]["runs"].values()
    assert run["rc"] == 0 and run["lossless"]["frames_identical"] == run["lossless"]["frames_compared"] > 0
    eager = report["latency"]["modes"]["eager"]
    assert sorted(map(int, eager["by_n"])) == list(SIZES) and eager["ar_call_ms_p50"] > 0
    assert all(eager["by_n"][str(n)]["q"] == n + 1 for n in SIZES)
    assert "cuda graph" not in report["latency"]["modes"] and report["latency"]["identical"]
    deployments = report["latency"]["deployments"]
    assert {"float32", "bfloat16"} <= set(deployments) and sorted(map(int, deployments["bfloat16"]["by_n"])) == list(SIZES)
    compiled = report["compiled"]
    assert compiled["ok"] and set(compiled["systems"]) == {"ar", "spec4"} and compiled["compile"] == "none"
    md = (tmp_path / "gpu_check.md").read_text()
    assert "(a) tests" in md and "(b) notebook sequence" in md and "| 64 | 65 |" in md and "speculative == AR: True" in md
    assert "(d) whole frames" in md and "fastest AR: ar" in md
