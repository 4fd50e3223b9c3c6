"""The numerical paths the miniature's build runs on, pinned so that a build does not depend on the CPU's
instruction set.

Measured on this machine (an AVX-512 CPU without AMX; docs/miniature.md, "Determinism"): left to choose, OpenBLAS
(numpy, scikit-learn: PCA and k-means) and ATen (torch's vectorised kernels) pick different kernels per instruction
set, and MKL (torch's float32 matrix products) rounds differently unless its conditional numerical reproducibility is
on; each changes the codec's codebooks or the trained weights in the 5th-7th digit, which moves every later number.
`BUILD_PINS` fixes all three to AVX2, the set every x86-64 machine of this kind has. They are read when the libraries
load, so `import helpers` sets them (`os.environ.setdefault`: a caller's own setting wins) before numpy or torch
loads in any of the project's processes (runner, build step, notebook kernels, tests). `numeric_paths()` reports
what is in effect and is part of the build's cache keys, so a build under other paths is a different cached step,
never mixed with this one.
"""

from __future__ import annotations

import os

BUILD_PINS = {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}


def numeric_paths() -> dict:
    """The kernels in effect in this process: ATen's CPU capability, OpenBLAS's core type(s), MKL_CBWR."""
    import torch
    from threadpoolctl import threadpool_info
    import numpy  # noqa: F401  (loads numpy's OpenBLAS, so that threadpoolctl sees it)
    openblas = sorted({str(p.get("architecture")) for p in threadpool_info() if p.get("internal_api") == "openblas"})
    return {"aten": torch.backends.cpu.get_cpu_capability(), "openblas": openblas,
            "mkl_cbwr": os.environ.get("MKL_CBWR")}
