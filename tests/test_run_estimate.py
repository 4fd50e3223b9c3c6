"""The GPU-time estimate of the paper's settings: the work counted from the parameters as the stages spend it, and
scripts/run_estimate.py's arithmetic (operations counted here at the real depths, priced by the GPU reference)."""

import json
import subprocess
import sys

import pytest

from helpers.experiment.run.params import REPO_ROOT, load_params
from helpers.experiment.bench.run_size import replay_configs, run_work, table1_frames_per_utterance


def test_the_paper_setting_decodes_what_its_stages_spend():
    P = load_params(REPO_ROOT / "params" / "qwen3-tts-0.6b.yaml")
    stages = run_work(P)["stages"]
    evaluated = 6 * 50
    assert (stages["evaluation"]["ar"], stages["evaluation"]["spec"]) == (evaluated, evaluated)
    assert (stages["quality"]["ar"], stages["quality"]["spec"]) == (9 * evaluated, 10 * evaluated)  # AR seed 0 reused
    assert (stages["calibration"]["ar"], stages["calibration"]["spec"]) == (200, 0)
    assert replay_configs(P) == 9 + 2 and stages["replay"]["spec"] == 11 * evaluated        # bf16: every run again
    exact = run_work(load_params(REPO_ROOT / "params" / "qwen3-tts-0.6b.yaml", {"inner_loop_dtype": "float64"}))
    assert exact["stages"]["replay"]["spec"] == 6 * 11                    # float64: the first run of each language
    assert table1_frames_per_utterance("evaluation") == pytest.approx(752e3 / 5794)    # FLEURS, six languages
    with pytest.raises(ValueError, match="not in the paper's Table 1"):
        table1_frames_per_utterance("test")


@pytest.mark.slow                               # builds a 28-layer checkpoint and counts its synthesis: ~15 s
def test_the_estimate_script_shows_its_arithmetic(tmp_path):
    done = subprocess.run([sys.executable, "scripts/run_estimate.py", "--out", str(tmp_path), "--frames", "2"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    e = json.loads((tmp_path / "run_estimate.json").read_text())
    real, price, ms = e["operations"]["real_depth"], e["price_us"], e["ms_per_frame"]
    assert (real["talker_layers"], real["predictor_layers"]) == (28, 5)
    assert 0 < real["inner_ar"] < real["synthesis_frame"] and real["talker"] > 0
    gpu = json.loads((REPO_ROOT / "outputs" / "gpu-reference" / "bench_gpu.json").read_text())
    side = gpu["mini"]["side_by_side"]["systems"]
    assert price["ours"] == pytest.approx(1e3 * side["ar"]["frame_ms"] / e["operations"]["miniature"]["ar"])
    assert ms["talker"] == pytest.approx(real["talker"] * price["official"] / 1e3)
    assert ms["inner_ar"] == pytest.approx(real["inner_ar"] * price["ours"] / 1e3)
    for name, s in e["settings"].items():
        w = s["work"]
        assert s["work"] == json.loads(json.dumps(run_work(load_params(REPO_ROOT / "params" / f"{name}.yaml"))))
        spent = (w["ar_frames"] * (ms["talker"] + ms["inner_ar"]) + w["spec_frames"] * (ms["talker"] + ms["inner_spec"])
                 + w["replay_frames"] * ms["inner_spec"])
        assert s["total_hours"] == pytest.approx(spent / 3.6e6)
        memory = s["resources"]["memory"]
        assert memory["weights"][0] == 2 * e["parameters"] > 1e9           # bf16 weights of the real configuration
    md = (tmp_path / "run_estimate.md").read_text()
    assert "| qwen3-tts-0.6b |" in md and "Not priced" in md
