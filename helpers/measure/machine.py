"""Where a latency was measured: the machine, named in every table and sentence that shows one.

    info = machine()                  # {"cpu_model", "cpu_flags", "cores", "threads", "cuda", "torch", ...}
    measured_on(info)                 # "Measured on AMD EPYC 9B14 (2 cores; AVX-512, bf16, VNNI; no AMX), 1 thread"
    start = load_average(); ...; record["machine"] = timed_on(start)     # a timing keeps its load, start and end

A measurement saved to a file keeps its `machine()` dict, so a notebook that reads it on another machine names the
machine it came from, not the one it runs on. The notebook check (`helpers.experiment.run.notebook_check`) refuses a
cell that shows milliseconds without the words `measured_on` starts with.
"""

from __future__ import annotations

import os
import platform

import torch

LABEL = "Measured on"                 # what every latency's cell says; the notebook check looks for it
MATRIX_FLAGS = ("amx_tile", "amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni", "avx512f", "avx_vnni", "avx2")


def _cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def _field(text: str, name: str) -> str | None:
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(name)), None)


def cpu_matrix_flags() -> list[str]:
    """The CPU's matrix and dot-product extensions that the kernels can use (Linux /proc/cpuinfo; [] elsewhere):
    AMX tiles (amx_tile, amx_bf16, amx_int8), AVX-512 (avx512f) with bfloat16 and VNNI dot products, AVX2."""
    flags = (_field(_cpuinfo(), "flags") or "").split()
    return sorted(f for f in flags if f in MATRIX_FLAGS)


def machine() -> dict:
    """This process's machine: CPU model, matrix extensions, cores, torch threads, the CUDA device if any."""
    return {"cpu_model": _field(_cpuinfo(), "model name") or platform.processor() or platform.machine(),
            "cpu_flags": cpu_matrix_flags(), "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def extensions(flags: list[str]) -> str:
    """"AVX-512, bf16, VNNI; no AMX" from cpu_matrix_flags()' list."""
    f = set(flags)
    names = [name for name, has in (("AMX", {"amx_tile"} & f), ("AVX-512", "avx512f" in f),
                                    ("AVX2", "avx2" in f and "avx512f" not in f),
                                    ("bf16", "avx512_bf16" in f), ("VNNI", {"avx512_vnni", "avx_vnni"} & f)) if has]
    return ", ".join(names or ["no AVX2"]) + ("" if "amx_tile" in f else "; no AMX")


def machine_name(info: dict | None) -> str:
    """The machine of `info` (a `machine()` dict, or an older file's environment dict) in a few words."""
    if not info:
        return "an unrecorded machine"
    if info.get("cuda"):
        return str(info["cuda"])
    model = info.get("cpu_model") or "a CPU whose model was not recorded"
    cores = f"{info['cores']} cores; " if info.get("cores") else ""
    return f"{model} ({cores}{extensions(info.get('cpu_flags') or [])})"


BUSY = 0.5          # a timing whose load average passed this share of the cores says so where it is shown


def load_average() -> float | None:
    """The 1-minute load average now (processes running or waiting for a core), None where the OS has none."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def timed_on(start_load: float | None) -> dict:
    """`machine()` of a timing that began at load average `start_load` (`load_average()` then), with "load":
    {"start", "end"}: every timing record keeps both."""
    return {**machine(), "load": {"start": start_load, "end": load_average()}}


def load_words(info: dict | None) -> str:
    """", load average 0.20 to 1.60 (over half of its 2 cores)" for a record with "load", else "": the 1-minute
    average at the timing's start and end (it counts the timing's own threads and the minute before it), flagged
    where it passed BUSY x the cores."""
    load = (info or {}).get("load") or {}
    if load.get("start") is None or load.get("end") is None:
        return ""
    cores = info.get("cores") or 1
    busy = max(load["start"], load["end"]) > BUSY * cores
    return (f", load average {load['start']:.2f} to {load['end']:.2f}"
            + (f" (over half of its {cores} cores)" if busy else ""))


def measured_on(info: dict | None, where: str = "") -> str:
    """"Measured on <machine>, <threads> thread(s), load average a to b<where>": the label of every latency
    (`where`: e.g. ", read from outputs/bench-reference/ (another machine than this run's)"); the load where the
    record kept it (`timed_on`), with a warning where it passed half the cores."""
    threads = (info or {}).get("threads")
    return (f"{LABEL} {machine_name(info)}" + (f", {threads} thread{'s' * (threads != 1)}" if threads else "")
            + load_words(info) + where)
