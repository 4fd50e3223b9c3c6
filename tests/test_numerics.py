"""The build's numerical paths: `import helpers` pins OpenBLAS and MKL before numpy and torch load (a caller's own
setting wins), the build step's environment pins ATen too, `numeric_paths` reports what is in effect, and the
miniature's cache keys and model folder carry it."""

import json
import os
import subprocess
import sys

from helpers.backends.mini.numerics import (BUILD_ATEN, GLOBAL_PINS, NUMPY_AVX512, build_env, keyed_paths,
                                            numeric_paths)

REPORT = "import helpers, json; from helpers.backends.mini.numerics import numeric_paths; print(json.dumps(numeric_paths()))"
PINNED = set(GLOBAL_PINS) | set(BUILD_ATEN)


def _paths_in_child(env: dict) -> dict:
    run = subprocess.run([sys.executable, "-c", REPORT], env=env, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_import_pins_openblas_and_mkl_and_the_build_step_pins_aten():
    bare = {k: v for k, v in os.environ.items() if k not in PINNED}
    paths = _paths_in_child(bare)
    assert paths["openblas"] == ["Haswell"] and paths["mkl_cbwr"] == "AVX2"
    assert not paths["numpy"].startswith("AVX512")              # numpy dispatches to AVX2 at most, on any x86 CPU
    assert _paths_in_child(build_env(bare)) == {"aten": "AVX2", "openblas": ["Haswell"], "mkl_cbwr": "AVX2",
                                                "numpy": paths["numpy"]}
    assert keyed_paths() == {"openblas": ["Haswell"], "mkl_cbwr": "AVX2"}            # this process too


def test_a_callers_own_setting_wins_and_is_reported():
    env = {**os.environ, "OPENBLAS_CORETYPE": "Sandybridge", "MKL_CBWR": "COMPATIBLE",
           "NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512 + ",AVX2"}
    paths = _paths_in_child(env)
    assert paths["openblas"] == ["Sandybridge"] and paths["mkl_cbwr"] == "COMPATIBLE"
    assert paths["numpy"] not in ("AVX2",) and not paths["numpy"].startswith("AVX512")
    assert build_env(env)["MKL_CBWR"] == "COMPATIBLE" and build_env(env)["ATEN_CPU_CAPABILITY"] == "avx2"


def test_a_build_refuses_an_openblas_loaded_before_the_pin():
    """numpy imported before helpers keeps the kernels it loaded with (here Sandybridge while the pin says Haswell):
    the keys say so and the build stops with what to do, instead of retraining on other numerical paths."""
    late = ("import os; os.environ['OPENBLAS_CORETYPE'] = 'Sandybridge'; import numpy; "
            "os.environ['OPENBLAS_CORETYPE'] = 'Haswell'; import helpers; "
            "from helpers.backends.mini.numerics import keyed_paths; keyed_paths()")
    run = subprocess.run([sys.executable, "-c", late], capture_output=True, text=True)
    assert run.returncode != 0
    assert "loaded before `import helpers`" in run.stderr and "['Sandybridge']" in run.stderr
    assert "Import helpers before numpy and torch" in run.stderr


def test_the_build_keys_carry_the_paths(smoke_cache):
    from helpers.backends.mini.build import SMOKE, build_mini
    mini = build_mini(SMOKE, smoke_cache / "mini")
    for step in ("codec", "model"):
        assert json.loads((mini.folders[step] / "params.json").read_text())["numerics"] == keyed_paths()
    recorded = json.loads((mini.folders["model"] / "numerics.json").read_text())
    assert recorded["openblas"] == ["Haswell"] and recorded["aten"] == numeric_paths()["aten"]
