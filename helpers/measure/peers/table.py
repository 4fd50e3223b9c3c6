"""The peers beside our loops: what a CPU user would run instead, at the code predictor's shape and thread count,
and the floor the weights' reads set (`metrics.json` "full_size" -> "peers" and "floors").

    peers_block(core, trees) -> {name: {"engine", "dtype", "threads", "ar_step_ms", "q_call_ms": {q: ms},
                                        "floor_ms", "frame_ms", "measured_on", "source"}}

- ONNX Runtime's `quantize_dynamic` int8 (`peers.onnx_dynamic`): measured here, in this process.
- llama.cpp Q8_0 and BF16 (`peers.llama`, built by `make peers`): what `make bench` measured on this machine
  (`LLAMA_FILE`), else the committed reference measurement (`LLAMA_REFERENCE`), labelled with its machine.
- floor_ms: the engine's weight bytes for one AR call (every projection and one head; int8 1 byte a weight, Q8_0
  34 bytes per 32, BF16 2) read once at this machine's measured read bandwidth (`measure.floor.read_floor`).
- frame_ms: 15 AR calls and nothing else, the least a peer's AR frame costs (its prefill, sampling and host loop
  come on top): the peer's AR loop as our headline compares with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from helpers.measure.floor import read_floor, row_flops
from helpers.measure.machine import load_average, machine, timed_on
from helpers.method.stack import FusedCore
from helpers.method.tree import SparseTree

LLAMA_FILE = Path("outputs/bench/peers_llama.json")
LLAMA_REFERENCE = Path("outputs/bench-reference/peers_llama.json")
BYTES_PER_WEIGHT = {"int8": 1.0, "Q8_0": 34 / 32, "BF16": 2.0, "float32": 4.0}


def step_weights(core: FusedCore) -> int:
    """Weights one AR call reads: every projection of the stack and one head."""
    return row_flops(core) // 2


def floors(core: FusedCore) -> dict:
    """{weight format: ms} one AR call's weights take to read at this machine's bandwidth (torch's threads), and
    the read measured ("read": `read_floor` of the int8 step's bytes)."""
    weights = step_weights(core)
    read = read_floor(weights)
    return {"read": read, **{f: weights * b / (read["gb_per_s"] * 1e9) * 1e3 for f, b in BYTES_PER_WEIGHT.items()}}


def llama_rows(threads: int, here: dict, shape: dict) -> dict:
    """llama.cpp's rows at `threads` and `shape` (hidden, vocab) from this machine's `make bench`, else from the
    committed reference."""
    for path, source in ((LLAMA_FILE, "make bench on this machine"), (LLAMA_REFERENCE, "committed reference")):
        if path.exists():
            data = json.loads(path.read_text())
            if source.startswith("make bench") and data["machine"].get("cpu_model") != here.get("cpu_model"):
                continue
            if any(data["shape"].get(k) != v for k, v in shape.items()):
                continue
            rows = data["by_threads"].get(str(threads)) or data["by_threads"].get(threads)
            if rows:
                return {name: {**row, "measured_on": data["machine"], "source": source} for name, row in rows.items()}
    return {}


def measure_llama(predictor, thread_counts, sizes=(1, 5, 9, 17), out: Path = LLAMA_FILE) -> dict | None:
    """llama.cpp Q8_0 and BF16 at the shape of `predictor` (a GGUF of its own weights, `peers.llama`), at each
    thread count, saved to `out` for `peers_block` (None where `make peers` has not installed llama.cpp). A call
    whose process crashed is left out of the rows and kept, with its message, under "failed"."""
    import tempfile

    from helpers.artifacts import save_json
    from helpers.measure.peers import llama

    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return None
    load = load_average()
    shape, weights = llama.code_predictor_shape(predictor), llama.code_predictor_weights(predictor)
    by_threads, build, failed = {}, None, {}
    with tempfile.TemporaryDirectory() as tmp:
        for dtype, label in (("q8_0", "Q8_0"), ("bf16", "BF16")):
            path = llama.write_gguf(Path(tmp) / f"{dtype}.gguf", weights, shape, dtype)
            for threads in thread_counts:
                try:
                    timed = llama.time_llama(path, threads, sizes=sizes)
                except RuntimeError as e:                     # llama.cpp crashed on this CPU: said, not fatal
                    failed[f"llama.cpp-{label}@{threads}"] = str(e)
                    print(f"llama.cpp {label} at {threads} thread(s) failed: {e}", flush=True)
                    continue
                build = timed["build"]
                by_threads.setdefault(str(threads), {})[f"llama.cpp-{label}"] = {
                    "engine": "llama.cpp", "dtype": label, "threads": threads, "ar_step_ms": timed["ar_step_ms"],
                    "q_call_ms": {q: ms for q, ms in timed["q_call_ms"].items() if q != 1}}
    data = {"machine": timed_on(load), "shape": shape, "build": build, "by_threads": by_threads, "failed": failed}
    save_json(out, data)
    return data


def peers_block(core: FusedCore, trees: dict[int, SparseTree], rounds: int = 60) -> dict:
    """The peers at the shape of `core` and torch's thread count (module docstring); trees: the q-row calls
    (q = N + 1)."""
    from helpers.measure.peers.onnx_dynamic import time_dynamic

    here, threads = machine(), torch.get_num_threads()
    floor = floors(core)
    ort = time_dynamic(core, trees, rounds=rounds)
    rows = {"onnxruntime-int8-dynamic": {**ort, "floor_ms": floor["int8"], "measured_on": here, "source": "this run"}}
    shape = {"hidden": core.predictor.hidden_size, "vocab": core.vocab}
    for name, row in llama_rows(threads, here, shape).items():
        rows[name] = {**row, "floor_ms": floor["Q8_0" if "Q8_0" in row["dtype"] else "BF16"]}
    for row in rows.values():
        row["frame_ms"] = 15 * row["ar_step_ms"]
    return {"rows": rows, "floor": floor}
