"""The build's numerical paths: `import helpers` pins them before numpy and torch load (a caller's own setting
wins), `numeric_paths` reports what is in effect, and the miniature's cache keys carry it."""

import json
import os
import subprocess
import sys

from helpers.backends.mini.numerics import BUILD_PINS, numeric_paths

REPORT = "import helpers, json; from helpers.backends.mini.numerics import numeric_paths; print(json.dumps(numeric_paths()))"


def _paths_in_child(env: dict) -> dict:
    run = subprocess.run([sys.executable, "-c", REPORT], env=env, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_import_pins_the_numerical_paths():
    bare = {k: v for k, v in os.environ.items() if k not in BUILD_PINS}
    assert _paths_in_child(bare) == {"aten": "AVX2", "openblas": ["Haswell"], "mkl_cbwr": "AVX2"}
    assert numeric_paths() == {"aten": "AVX2", "openblas": ["Haswell"], "mkl_cbwr": "AVX2"}     # this process too


def test_a_callers_own_setting_wins_and_is_reported():
    env = {**os.environ, "OPENBLAS_CORETYPE": "Sandybridge", "MKL_CBWR": "COMPATIBLE"}
    paths = _paths_in_child(env)
    assert paths["openblas"] == ["Sandybridge"] and paths["mkl_cbwr"] == "COMPATIBLE" and paths["aten"] == "AVX2"


def test_the_build_keys_carry_the_paths(smoke_cache):
    from helpers.backends.mini.build import SMOKE, build_mini
    mini = build_mini(SMOKE, smoke_cache / "mini")
    for step in ("codec", "model"):
        assert json.loads((mini.folders[step] / "params.json").read_text())["numerics"] == numeric_paths()
