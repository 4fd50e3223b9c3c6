"""What a reader follows through one speculative round, measured: the functions of `helpers/` that run while the
decoders are built and decode a frame, eagerly and as a captured graph runs them, their files and lines.

A reader who follows one round, eager and captured, reads every function the decoders run: their construction (the
constructors, the choice of module per root position t, the tree's tables `TreeIndex`, the verify call's tables
`FusedStep.tables`, the compiler `CallCompiler`), then per frame the decoder's loop, the round's phases, the verify
call and the stack, the drafter, the sampler and the walk. The tracer records them (`sys.settrace`: each function
whose code lies under `helpers/`, nested comprehensions inside their function counted once; the frame's argument
check, `CodePredictor.check_codes`, is input validation, not the method, and left out), on the device path: the
gathered `FusedStep` (`views=False`), as a GPU runs the eager round, and the k-rounds-per-graph modules, the ones a
CUDA graph captures and replays, run eagerly under the capture guard (`helpers.method.capture.DeviceOps`, strict:
the guard itself is not counted). No GPU here: what a GPU adds to them, `CapturedGraph` (capture and replay) and
the compiler's booking of its time, is counted from its source. The predictor's own stack (`FusedCore`, the weights'
layout) is built before: a decoder shares it. The CPU's eager call (`helpers.method.views`) is a deployment of its
own, measured apart.
"""

import inspect
import sys
from pathlib import Path

import pytest
import torch

from conftest import SPECS, frame_inputs
from drafting import TREES, random_drafters
from helpers.adapter.tiny import build_tiny_talker
from helpers.method.capture import DeviceOps
from helpers.method.compiler import CallCompiler, CapturedGraph
from helpers.method.decoding import Decoder
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig, frame_uniforms

HELPERS = Path(__file__).resolve().parent.parent / "helpers"
INPUT_CHECKS = {"CodePredictor.check_codes"}          # validates the caller's codes: not a step of the round
GUARD = str(HELPERS / "method" / "capture.py")         # the capture guard the captured modules run under here
# Measured at the split of round.py (the sampler in sampler.py, `TreeIndex` and `accept` in tree.py, `CapturedGraph`
# in compiler.py, the phase clock out of the method). Before it, per frame: 4 files, 375 lines (decoding 56,
# drafters 32, round 128 with the sampler, the tree's tables and the replay, stack 159). After it, per frame: 7 files,
# 327 lines (compiler 8, decoding 47, drafters 38, round 71, sampler 20, stack 126, tree 17); with construction and
# capture: 8 files, 596 lines (compiler 60, decoding 138, drafters 38, predictor 16, round 111, sampler 20, stack 166,
# tree 47). With one call path over the weights and one decoder (`Decoder`: one full-tree round for every root,
# weights laid out at construction), per frame: 7 files, 297 lines (compiler 8, decoding 54, drafters 38, round 59,
# sampler 20, stack 101, tree 17); with construction and capture: 8 files, 554 lines (compiler 60, decoding 128,
# drafters 38, predictor 13, round 91, sampler 20, stack 168, tree 36); the runtime deployments' dispatch (the step
# type, the prefill's call) adds 3: 557 (decoding 130, round 92). The goal: at most 5 files and 600 lines,
# construction included; the files are the concepts a round is made of (sampler, tree, compiler apart).
PER_FRAME_FILES, PER_FRAME_LINES = 7, 297
BUILT_FILES, BUILT_LINES = 8, 557


def traced(*runs) -> set:
    """The code objects under helpers/ that the `runs` call."""
    codes = set()

    def tracer(frame, event, arg):
        code = frame.f_code
        if (event == "call" and code.co_filename.startswith(str(HELPERS)) and code.co_filename != GUARD
                and code.co_qualname not in INPUT_CHECKS):
            codes.add(code)

    sys.settrace(tracer)
    try:
        for run in runs:
            run()
    finally:
        sys.settrace(None)
    return codes


def line_count(objects) -> dict[str, int]:
    """{file: lines} of code objects or functions, their spans merged per file (a nested function counts once)."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for obj in objects:
        lines, start = inspect.getsourcelines(obj)
        file = obj.co_filename if inspect.iscode(obj) else inspect.getsourcefile(obj)
        spans.setdefault(str(Path(file).relative_to(HELPERS.parent)), []).append((start, start + len(lines) - 1))
    out = {}
    for name, found in spans.items():
        total, end = 0, 0
        for a, b in sorted(found):                      # union of the spans
            total += max(0, b - max(a, end + 1) + 1)
            end = max(end, b)
        out[name] = total
    return out


# what a GPU adds to the captured path, counted from its source: per frame the replay; once, the capture and the
# compiler's booking of its time
REPLAY, CAPTURE = {CapturedGraph.__call__}, {CapturedGraph.__init__, CapturedGraph.capture, CallCompiler._book}


@pytest.fixture(scope="module")
def frame():
    spec = SPECS["h96gqa"]
    cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=1, dtype=torch.float64))
    cp.stack                                            # the predictor's stack, built before any decoder
    g, c0 = frame_inputs(spec, 1, seed=3)
    return cp, random_drafters(cp, seed=1)["offsets_prenorm"], g, c0, frame_uniforms(torch.Generator().manual_seed(0),
                                                                                      batch=1)


def decoders(frame, sampler=SamplerConfig(), tree=TREES["sparse16"]):
    """The eager and the captured decoder of one tree (the sampler and the tree: their inputs, built before)."""
    cp, drafter, *_ = frame
    return (Decoder(cp, sampler, drafter, tree, views=False),
            Decoder(cp, sampler, drafter, tree, "none", rounds_per_graph=(3, 1)))


def frames(frame, eager, captured):
    """The per-frame runs: the eager decoder's frame, the captured decoder's frame and its two graphs' modules run
    under the strict capture guard (what `tests/test_capture.py` checks without CUDA)."""
    _, _, g, c0, u = frame

    def guarded():
        buffers = captured.status + captured.buffers(1)               # query, t, rounds, k, v, u, codes
        with torch.no_grad(), DeviceOps(strict=True):
            captured.open(g, c0, *buffers)
            captured.more(*buffers)

    return (lambda: eager.decode_frame(g, c0, u), lambda: captured.decode_frame(g, c0, u), guarded)


def report(counts: dict[str, int]) -> str:
    return f"{len(counts)} files, {sum(counts.values())} lines (" + ", ".join(
        f"{name.removeprefix('helpers/method/')} {n}" for name, n in sorted(counts.items())) + ")"


def test_one_round_per_frame(frame):
    """Per frame, built and warm: what every frame runs."""
    eager, captured = decoders(frame)
    runs = frames(frame, eager, captured)
    for run in runs:
        run()
    both = line_count(traced(*runs) | REPLAY)
    print(f"one round per frame, eager and captured: {report(both)}")
    assert len(both) <= PER_FRAME_FILES and sum(both.values()) <= PER_FRAME_LINES, report(both)
    assert {"helpers/method/round.py", "helpers/method/stack.py", "helpers/method/drafters.py"} <= set(both)


def test_one_round_with_its_construction_and_capture(frame):
    """The decoders built (construction and the compiler), then a frame of each: everything a reader follows."""
    built = []
    construction = traced(lambda: built.extend(decoders(frame)))
    everything = line_count(construction | traced(*frames(frame, *built)) | REPLAY | CAPTURE)
    print(f"one round, built, eager and captured: {report(everything)}")
    assert len(everything) <= BUILT_FILES and sum(everything.values()) <= BUILT_LINES, report(everything)


def test_the_cpu_call_and_the_ar_loop_add_little(frame):
    """The CPU's eager call adds its own module (views at a host int), and the AR loop reads in the same files."""
    cp, drafter, g, c0, u = frame
    cpu_decoder = Decoder(cp, SamplerConfig(), drafter, TREES["sparse16"], views=True)
    cpu_decoder.decode_frame(g, c0, u)
    cpu = line_count(traced(lambda: cpu_decoder.decode_frame(g, c0, u)))
    assert "helpers/method/views.py" in cpu and cpu["helpers/method/views.py"] < 30
    ar_decoder = Decoder(cp, SamplerConfig(), views=False)
    ar_decoder.decode_frame(g, c0, u)
    ar = line_count(traced(lambda: ar_decoder.decode_frame(g, c0, u)))
    assert set(ar) <= {"helpers/method/decoding.py", "helpers/method/round.py", "helpers/method/stack.py",
                       "helpers/method/sampler.py"}, ar
