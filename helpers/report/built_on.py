"""Which machine a duration of the miniature's build was measured on: the one that ran its build step, which for a
step shipped with the repository (`outputs/mini-trained/`) is not the machine running the notebook.

    built_on(load_json(model_folder / "numerics.json"))
    # "on the machine that built the miniature's model (its numerics.json: ATen kernels AVX2, OpenBLAS Haswell)"

The build records the kernels it ran with (`helpers.backends.mini.numerics.numeric_paths`), not the CPU's name, so
that is what the label can say.
"""

from __future__ import annotations


def built_on(numerics: dict | None) -> str:
    """The label of a build duration, from the model step's recorded numerics ({"aten", "openblas": [...], ...})."""
    if not numerics:
        return "measured on the machine that built the miniature (not recorded; not necessarily this notebook's)"
    parts = [f"ATen kernels {numerics['aten']}"] if numerics.get("aten") else []
    if numerics.get("openblas"):
        parts.append("OpenBLAS " + "/".join(numerics["openblas"]))
    return ("measured on the machine that built the miniature (its numerics.json: "
            + ", ".join(parts or ["no kernels recorded"]) + "), not necessarily this notebook's")

HERE = "measured where this run's miniature build ran (the cache's)"


def build_rows(build_s: dict, shipped, shipped_on: str) -> list[dict]:
    """One row per build step (`Mini.history["build_s"]`: step -> seconds or None) with where it was measured: a
    shipped step (`Mini.history["shipped"]`) `shipped_on` (`built_on(...)`), the others HERE."""
    return [{"build step": k, "seconds": v, "measured": shipped_on if k in shipped else HERE}
            for k, v in build_s.items()]
