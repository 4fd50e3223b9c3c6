"""What a reader follows through one speculative round, measured: the functions of `helpers/` that run while the
decoders decode a frame, eagerly and as a captured graph runs them, their files and lines.

A reader who follows one round, eager and captured, reads every function the frame runs (not the constructors,
which build the modules once): the decoder's loop, the round's phases, the verify call and the stack, the drafter
and the sampler. The tracer records them (`sys.settrace`: each function whose code lies under `helpers/`, nested
comprehensions inside their function counted once; the frame's argument check, `CodePredictor.check_codes`, is
input validation, not the method, and left out), on the device path: the gathered `FusedStep` (`views=False`),
as a GPU runs the eager round, and `FrameSpeculative`'s modules, the ones a CUDA graph captures and replays, run
eagerly (no GPU here: what a GPU adds to them, the replay `CapturedGraph.__call__`, is counted from its source).
The CPU's eager call (`helpers.method.views`) is a deployment of its own, measured apart.
"""

import inspect
import sys
from pathlib import Path

import pytest
import torch

from conftest import SPECS, frame_inputs
from drafting import TREES, random_drafters
from helpers.adapter.tiny import build_tiny_talker
from helpers.method.decoding import ARDecoder, FrameSpeculative, SpeculativeDecoder
from helpers.method.predictor import CodePredictor
from helpers.method.round import CapturedGraph, SamplerConfig, frame_uniforms

HELPERS = Path(__file__).resolve().parent.parent / "helpers"
MAX_FILES, MAX_LINES = 4, 700
INPUT_CHECKS = {"CodePredictor.check_codes"}          # validates the caller's codes: not a step of the round


def reading_path(*runs) -> dict[str, int]:
    """{file under helpers/: lines of the functions the `runs` call there} (line spans merged per file)."""
    codes = set()

    def tracer(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(str(HELPERS)) and code.co_qualname not in INPUT_CHECKS:
            codes.add(code)

    sys.settrace(tracer)
    try:
        for run in runs:
            run()
    finally:
        sys.settrace(None)
    spans: dict[str, list[tuple[int, int]]] = {}
    for code in codes:
        lines, start = inspect.getsourcelines(code)
        spans.setdefault(str(Path(code.co_filename).relative_to(HELPERS.parent)), []).append(
            (start, start + len(lines) - 1))
    out = {}
    for name, found in spans.items():
        total, end = 0, 0
        for a, b in sorted(found):                      # union of the spans: a nested function counts once
            total += max(0, b - max(a, end + 1) + 1)
            end = max(end, b)
        out[name] = total
    return out


@pytest.fixture(scope="module")
def frame():
    spec = SPECS["h96gqa"]
    cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=1, dtype=torch.float64))
    g, c0 = frame_inputs(spec, 1, seed=3)
    return cp, random_drafters(cp, seed=1)["offsets_prenorm"], g, c0, frame_uniforms(torch.Generator().manual_seed(0),
                                                                                      batch=1)


def path_of(*frames) -> dict[str, int]:
    """The reading path of the frames (callables, each decoding one frame), each run once before (built and warm:
    what is read is what every frame runs)."""
    for run in frames:
        run()
    return reading_path(*frames)


def test_one_round_reads_in_four_files(frame):
    cp, drafter, g, c0, u = frame
    sampler, tree = SamplerConfig(), TREES["sparse16"]
    eager = SpeculativeDecoder(cp, drafter, tree, sampler, views=False)
    captured = FrameSpeculative(cp, drafter, tree, sampler, "none", first=3, then=1)
    both = path_of(lambda: eager.decode_frame(g, c0, u), lambda: captured.decode_frame(g, c0, u))
    replay, _ = inspect.getsourcelines(CapturedGraph.__call__)
    both[str(Path(inspect.getsourcefile(CapturedGraph)).relative_to(HELPERS.parent))] += len(replay)
    report = ", ".join(f"{name} {n}" for name, n in sorted(both.items()))
    assert len(both) <= MAX_FILES and sum(both.values()) <= MAX_LINES, f"{sum(both.values())} lines: {report}"
    print(f"one round, eager and captured: {len(both)} files, {sum(both.values())} lines ({report})")
    assert {"helpers/method/round.py", "helpers/method/stack.py", "helpers/method/drafters.py"} <= set(both)


def test_the_cpu_call_and_the_ar_loop_add_little(frame):
    """The CPU's eager call adds its own module (views at a host int), and the AR loop reads in the same files."""
    cp, drafter, g, c0, u = frame
    cpu_decoder = SpeculativeDecoder(cp, drafter, TREES["sparse16"], SamplerConfig(), views=True)
    cpu = path_of(lambda: cpu_decoder.decode_frame(g, c0, u))
    assert "helpers/method/views.py" in cpu and cpu["helpers/method/views.py"] < 30
    ar_decoder, sampler = ARDecoder(cp, views=False), SamplerConfig()
    ar = path_of(lambda: ar_decoder.decode_frame(g, c0, sampler, u))
    assert set(ar) <= {"helpers/method/decoding.py", "helpers/method/round.py", "helpers/method/stack.py"}, ar
