"""scripts/real_shapes.py end to end on a scaled-down copy of the real checkpoint's configuration files (the real
token and codec ids, the real text vocabulary; small widths and depths): build through the official classes, load,
the data stage, teacher forcing, training, calibration, AR and speculative synthesis with identical codes, decode."""

import subprocess
import sys

from helpers.experiment.run.params import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts"))
from real_shapes import scaled_configs  # noqa: E402

def test_the_real_shapes_script_runs_every_stage_on_scaled_configs(tmp_path):
    configs = scaled_configs(tmp_path / "configs")
    result = subprocess.run([sys.executable, "scripts/real_shapes.py", "--configs", str(configs), "--frames", "3",
                             "--threads", "1", "--keep", str(tmp_path / "work")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "FAILED" not in result.stdout and "identical: True" in result.stdout
    assert "tree size 16" in result.stdout
