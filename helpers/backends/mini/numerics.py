"""The numerical paths the miniature's build runs on, pinned so that a build does not depend on the CPU's
instruction set.

Measured on this machine (an AVX-512 CPU without AMX; docs/miniature.md, "Determinism"): left to choose, OpenBLAS
(numpy, scikit-learn: PCA and k-means) and ATen (torch's vectorised kernels) pick different kernels per instruction
set, and MKL (torch's float32 matrix products) rounds differently unless its conditional numerical reproducibility is
on; each changes the codec's codebooks or the trained weights in the 5th-7th digit, which moves every later number.
The pins are read when the libraries load, so they are environment variables:

- `GLOBAL_PINS` (OpenBLAS Haswell, MKL_CBWR AVX2, numpy's dispatch without AVX-512): `import helpers` sets them
  (`os.environ.setdefault`: a caller's own setting wins) before numpy or torch loads in any of the project's
  processes. OpenBLAS's and MKL's are part of the build's keys. numpy's is not: it was found in the audio path (a
  probe, docs/miniature.md "The audio path's step": numpy's float32 ufuncs in the codec's decode, Griffin-Lim, round
  by the SIMD target numpy dispatches to, and with them the recogniser's transcripts), while the build's numbers were
  already equal to the last digit on an AVX2 and an AVX-512 machine without it; keying it would only re-key the
  shipped miniature. On a machine without AVX-512 (the one the miniature was trained on) the pin changes nothing.
- `BUILD_ATEN` (ATen's AVX2 kernels): only in the build step's process (`build_env`, the runner's `--build` step).
  Everywhere else ATen keeps its own choice: inductor's compiled kernels match the eager ones bit for bit in float64
  only at ATen's own choice (tests/test_compiled.py), so pinning it for every process would break that proof. The
  capability a model was trained with is recorded beside it (`numerics.json` in the model step's folder).
"""

from __future__ import annotations

import os

NUMPY_AVX512 = "AVX512F,AVX512CD,AVX512_KNL,AVX512_KNM,AVX512_SKX,AVX512_CLX,AVX512_CNL,AVX512_ICL,AVX512_SPR"
GLOBAL_PINS = {"OPENBLAS_CORETYPE": "Haswell", "MKL_CBWR": "AVX2", "NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512}
BUILD_ATEN = {"ATEN_CPU_CAPABILITY": "avx2"}


def set_global_pins() -> None:
    """Set `GLOBAL_PINS` in this process's environment where the caller has not (`import helpers` does, before
    numpy or torch should load)."""
    for name, value in GLOBAL_PINS.items():
        os.environ.setdefault(name, value)


def build_env(env: dict | None = None) -> dict:
    """The environment of a build process: `env` (default: this process's) with the global pins (where unset) and
    ATen's build pin."""
    base = dict(os.environ if env is None else env)
    return {**GLOBAL_PINS, **base, **BUILD_ATEN}


def numeric_paths() -> dict:
    """The kernels in effect in this process: ATen's CPU capability, OpenBLAS's core type(s), MKL_CBWR, and the
    highest SIMD target numpy dispatches to."""
    import torch
    from threadpoolctl import threadpool_info
    import numpy  # noqa: F401  (loads numpy's OpenBLAS, so that threadpoolctl sees it)
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    openblas = sorted({str(p.get("architecture")) for p in threadpool_info() if p.get("internal_api") == "openblas"})
    enabled = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    return {"aten": torch.backends.cpu.get_cpu_capability(), "openblas": openblas,
            "mkl_cbwr": os.environ.get("MKL_CBWR"), "numpy": enabled[-1] if enabled else "baseline"}


def keyed_paths() -> dict:
    """The paths that key a build: OpenBLAS's and MKL's (the same in every process of the project), not ATen's (which
    only the build step pins; it is recorded with the model instead). Raises where an OpenBLAS loaded before the pin
    was set (numpy imported before helpers) and runs other kernels than OPENBLAS_CORETYPE names: such a build would
    neither match the shipped miniature's keys nor compute what the pinned build computes."""
    paths = numeric_paths()
    pinned = os.environ.get("OPENBLAS_CORETYPE", "")
    stray = [arch for arch in paths["openblas"] if arch.lower() != pinned.lower()]
    if pinned and stray:
        raise RuntimeError(f"numpy (or scipy) was loaded before `import helpers`, so its OpenBLAS runs {stray} kernels, "
                           f"not OPENBLAS_CORETYPE={pinned}: the miniature's build would key and compute on other "
                           "numerical paths (and retrain what is shipped). Import helpers before numpy and torch "
                           "(first line of the script; in a notebook, restart the kernel), or export "
                           f"OPENBLAS_CORETYPE={pinned} before starting Python.")
    return {"openblas": paths["openblas"], "mkl_cbwr": paths["mkl_cbwr"]}
