"""What a reader follows through one speculative round, measured: the files and lines of `helpers/` that run while
the decoders are built and decode a frame, and the switches of file along one round.

The honest count: a reader who follows one round reads every function the decoders run, on the CPU's default path
(the eager host loop over `ViewStep`) and on the captured path (the k-rounds-per-graph modules, run eagerly under
the capture guard `helpers.method.capture.DeviceOps`, strict, as a CUDA graph captures them), their construction
included: the predictor's stack (`FusedCore`, the weights' layout, built here by the first decoder), the decoders,
their modules and runners, the compiler. No GPU here: what a GPU adds, `CapturedGraph` (capture and replay) and the
compiler's booking of its time, is counted from its source. The tracer records every function whose code lies under
`helpers/` (nested comprehensions counted once); to it are added the docstrings that carry the contracts: each
file's module docstring and the docstring of each class whose methods run. Left out: the frame's argument check
(`CodePredictor.check_codes`, input validation) and the decoders' inputs, built before (the sampler's settings,
the trees, the drafter).

File switches: along one eager round on the CPU, from the decoder's loop into the round and back, each change of the
file whose code runs (a call into another file, and the return from it) is a switch.
"""

import ast
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
# Measured by this count when it was made honest (CPU default and captured, construction, docstrings): 11 files,
# 971 lines, 24 switches per round (decoding -> round -> views -> stack -> views -> round -> sampler -> round ->
# sampler -> round -> tree -> round -> stack -> round -> drafters -> stack -> drafters -> stack -> drafters ->
# stack -> drafters -> round -> tree -> round -> decoding). With one runner per mode, the round's packing and walk in
# round.py, the sampler's draw one call, the drafter's norm one call over every depth, the CPU's view call and the
# weights' layout per kernel (`make_linear`) in stack.py: 8 files (compiler, decoding, drafters, predictor, round,
# sampler, stack, tree), 937 lines, of which 330 are docstrings and 399 construction (per frame alone: 538), and 12
# switches (decoding -> round -> stack -> round -> sampler -> round -> stack -> round -> drafters -> stack ->
# drafters -> round -> decoding). The two switches past 10 are the one KV write (`commit_kv`) and the one RMSNorm
# (`rms_norm`), each kept in stack.py on purpose; 700 lines would take most of the docstrings.
FILES, LINES, SWITCHES = 8, 940, 12
SAMPLER = SamplerConfig()
# what a GPU adds to the captured path, counted from its source: per frame the replay; once, the capture and the
# compiler's booking of its time
ON_A_GPU = {CapturedGraph.__call__, CapturedGraph.__init__, CapturedGraph.capture, CallCompiler._book}


def ours(code) -> bool:
    return (code.co_filename.startswith(str(HELPERS)) and code.co_filename != GUARD
            and code.co_qualname not in INPUT_CHECKS)


def traced(*runs) -> set:
    """The code objects under helpers/ that the `runs` call."""
    codes = set()

    def tracer(frame, event, arg):
        if event == "call" and ours(frame.f_code):
            codes.add(frame.f_code)

    sys.settrace(tracer)
    try:
        for run in runs:
            run()
    finally:
        sys.settrace(None)
    return codes


def file_of(obj) -> str:
    return obj.co_filename if inspect.iscode(obj) else inspect.getsourcefile(obj)


def spans(objects) -> dict[str, list[tuple[int, int]]]:
    """{file: [(first, last line)]} of the code objects or functions, their files' module docstrings and the
    docstrings of the classes whose methods they are."""
    found: dict[str, list[tuple[int, int]]] = {}
    classes: dict[str, set] = {}
    for obj in objects:
        lines, start = inspect.getsourcelines(obj)
        found.setdefault(file_of(obj), []).append((start, start + len(lines) - 1))
        qualname = (obj.co_qualname if inspect.iscode(obj) else obj.__qualname__).split(".")
        if len(qualname) > 1 and not qualname[0].startswith("<"):
            classes.setdefault(file_of(obj), set()).add(qualname[0])
    for file in found:
        module = ast.parse(Path(file).read_text())
        if ast.get_docstring(module):
            found[file].append((module.body[0].lineno, module.body[0].end_lineno))
        for node in module.body:
            if isinstance(node, ast.ClassDef) and node.name in classes.get(file, ()) and ast.get_docstring(node):
                found[file].append((node.lineno, node.body[0].end_lineno))
    return found


def line_count(objects) -> dict[str, int]:
    """{file: lines read}: the spans of `spans` merged per file (a line counts once)."""
    out = {}
    for file, found in spans(objects).items():
        total, end = 0, 0
        for a, b in sorted(found):
            total += max(0, b - max(a, end + 1) + 1)
            end = max(end, b)
        out[str(Path(file).relative_to(HELPERS.parent))] = total
    return out


def switches(run) -> list[str]:
    """The files (stems) whose code runs along the first `Round` call of `run`, from its caller's file back to it,
    consecutive repeats merged."""
    stack, seq, state = [], [], {"on": False, "done": False}

    def note():
        if state["on"] and stack and seq[-1] != stack[-1]:
            seq.append(stack[-1])

    def tracer(frame, event, arg):
        code = frame.f_code
        if event != "call" or not ours(code) or state["done"]:
            return None
        if code.co_qualname == "Round.forward" and not state["on"]:
            state["on"] = True
            seq.append(stack[-1])
        stack.append(Path(code.co_filename).stem)
        note()

        def local(frame_, event_, arg_):
            if event_ == "return":
                stack.pop()
                if state["on"] and frame_.f_code.co_qualname == "Round.forward":
                    note()
                    state["on"], state["done"] = False, True
                note()
            return local
        return local

    sys.settrace(tracer)
    try:
        run()
    finally:
        sys.settrace(None)
    return seq


@pytest.fixture()
def frame():
    """A fresh predictor (its stack not built yet), a drafter and one frame's inputs."""
    spec = SPECS["h96gqa"]
    cp = CodePredictor.from_talker(build_tiny_talker(spec, seed=1, dtype=torch.float64))
    g, c0 = frame_inputs(spec, 1, seed=3)
    return cp, random_drafters(cp, seed=1)["offsets_prenorm"], g, c0, frame_uniforms(torch.Generator().manual_seed(0),
                                                                                      batch=1)


def decoders(frame, tree=TREES["sparse16"]):
    """The CPU's default decoder (eager, `ViewStep`) and the captured one (3 rounds, then 1, per graph)."""
    cp, drafter, *_ = frame
    return Decoder(cp, SAMPLER, drafter, tree), Decoder(cp, SAMPLER, drafter, tree, rounds_per_graph=(3, 1))


def frames(frame, eager, captured):
    """The per-frame runs: the eager frame, the captured decoder's frame and its two graphs' modules under the
    strict capture guard (what `tests/test_capture.py` checks without CUDA)."""
    _, _, g, c0, u = frame

    def guarded():
        graphs = captured.runner
        buffers = graphs.progress + captured.buffers(1)               # query, t, rounds, k, v, u, codes
        with torch.no_grad(), DeviceOps(strict=True):
            graphs.first(g, c0, *buffers)
            graphs.then(*buffers)

    return (lambda: eager.decode_frame(g, c0, u), lambda: captured.decode_frame(g, c0, u), guarded)


def report(counts: dict[str, int]) -> str:
    return f"{len(counts)} files, {sum(counts.values())} lines (" + ", ".join(
        f"{name.removeprefix('helpers/method/')} {n}" for name, n in sorted(counts.items())) + ")"


def test_one_round_built_eager_and_captured(frame):
    """Everything a reader follows: the decoders built (the stack's layout included), then a frame of each."""
    built = []
    construction = traced(lambda: built.extend(decoders(frame)))
    everything = line_count(construction | traced(*frames(frame, *built)) | ON_A_GPU)
    print(f"one round, built, eager and captured: {report(everything)}")
    assert "helpers/method/stack.py" in everything and "helpers/method/compiler.py" in everything
    assert len(everything) <= FILES and sum(everything.values()) <= LINES, report(everything)


def test_file_switches_along_one_round(frame):
    """One eager round on the CPU, from the decoder's loop and back to it."""
    eager, _ = decoders(frame)
    _, _, g, c0, u = frame
    seq = switches(lambda: eager.decode_frame(g, c0, u))
    print(f"{len(seq) - 1} switches: " + " -> ".join(seq))
    assert seq[0] == seq[-1] == "decoding" and "round" in seq, seq
    assert len(seq) - 1 <= SWITCHES, " -> ".join(seq)


def test_the_count_sees_what_it_claims(frame):
    """The count is not blind: the construction reads the stack's layout, the CPU's frame its view call, the
    captured path its graphs' loops; docstrings are counted."""
    built = []
    construction = traced(lambda: built.extend(decoders(frame)))
    names = {c.co_qualname for c in construction}
    assert {"FusedCore._build", "Decoder.__init__", "RoundGraphs.__init__", "HostRounds.__init__"} <= names, names
    eager, captured = built
    per_frame = {c.co_qualname for c in traced(*frames(frame, eager, captured))}
    assert {"ViewStep.forward", "RoundLoop.forward", "SpeculativeFrame.forward", "Round.phases"} <= per_frame
    plain = sum(b - a + 1 for a, b in (  # the functions alone, without the docstrings around them
        (s, s + len(inspect.getsourcelines(c)[0]) - 1) for c in construction for s in [inspect.getsourcelines(c)[1]]))
    assert sum(line_count(construction).values()) > 0 and plain > 0


def test_the_ar_loop_reads_in_the_same_files(frame):
    """The AR loop reads in the files of the speculative one."""
    cp, drafter, g, c0, u = frame
    ar_decoder = Decoder(cp, SAMPLER)
    ar_decoder.decode_frame(g, c0, u)
    ar = line_count(traced(lambda: ar_decoder.decode_frame(g, c0, u)))
    assert set(ar) <= {"helpers/method/decoding.py", "helpers/method/round.py", "helpers/method/stack.py",
                       "helpers/method/sampler.py"}, ar


def test_every_mode_has_the_same_attributes(frame):
    """One dispatch: the decoder of every mode holds the same attributes; what a mode alone uses is its runner's."""
    cp, drafter, *_ = frame
    tree = TREES["sparse4"]
    modes = [Decoder(cp, SAMPLER), Decoder(cp, SAMPLER, rounds_per_graph=(14, 1)),
             Decoder(cp, SAMPLER, drafter, tree), Decoder(cp, SAMPLER, drafter, tree, rounds_per_graph=(3, 1))]
    assert len({frozenset(vars(d)) for d in modes}) == 1, [sorted(vars(d)) for d in modes]
    assert [type(d.runner).__name__ for d in modes] == ["ARRunner", "ARRunner", "HostRounds", "RoundGraphs"]
