"""Shared fixtures: tiny official talkers in two differently shaped configs; the `slow` tier.

A test is `slow` when it needs the smoke miniature or the tiny real checkpoint (built once per session, minutes
on 2 cores) or is marked so itself: `pytest -m "not slow"` (`make test-fast`) runs the rest in a few minutes, the
method's exactness tests among them; `make test` runs everything.
"""

import helpers  # noqa: F401  (first: the numerical pins take effect only before numpy and torch load)
import os
import time

import pytest
import torch

from helpers.method.predictor import CodePredictor
from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker
from helpers.experiment.run.process import process_settings

process_settings()      # the test session is a process of the project: its settings, where it starts

# Two shapes required by the foundation issue: 2 layers / hidden 64 / vocab 64 (MHA) and
# 3 layers / hidden 96 / GQA 3:1 / vocab 100 with a talker of another width (projection in play).
SPECS = {
    "h64": TinyTalkerSpec(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4, head_dim=16,
                          vocab_size=64, talker_hidden_size=64, logit_scale=10.0),
    "h96gqa": TinyTalkerSpec(hidden_size=96, num_layers=3, num_heads=6, num_kv_heads=2, head_dim=16,
                             vocab_size=100, talker_hidden_size=48, logit_scale=10.0),
}


SLOW_FIXTURES = ("smoke_cache", "qwen3_tiny")


@pytest.hookimpl(tryfirst=True)         # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items):
    """Mark `slow` every test whose fixtures (direct or through others) build the smoke miniature or qwen3_tiny, and
    put it in that fixture's group: `make test` runs the tests in two processes (pytest-xdist, `--dist loadgroup`),
    and a group's tests run in one of them, so each session fixture is built once."""
    for item in items:
        if used := [f for f in SLOW_FIXTURES if f in getattr(item, "fixturenames", ())]:
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group(used[0]))


@pytest.fixture(scope="session")
def smoke_cache(tmp_path_factory):
    """One cache folder per test session: the smoke miniature is built once, for every test that needs it."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session", params=list(SPECS))
def tiny(request):
    """(spec, talker, predictor) in float64 on CPU."""
    spec = SPECS[request.param]
    talker = build_tiny_talker(spec, seed=1, dtype=torch.float64)
    return spec, talker, CodePredictor.from_talker(talker)


def frame_inputs(spec, n, seed, dtype=torch.float64):
    from helpers.adapter.tiny import random_frame_inputs
    return random_frame_inputs(spec.talker_hidden_size, spec.talker_vocab_size, n,
                               torch.Generator().manual_seed(seed), dtype)


@pytest.fixture(scope="session")
def qwen3_tiny(tmp_path_factory):
    """Paths of a tiny random Qwen3-TTS checkpoint, Whisper and local datasets (tests/qwen3_tiny.py), built once."""
    from qwen3_tiny import build_tiny_datasets, build_tiny_tts, build_tiny_whisper
    root = tmp_path_factory.mktemp("qwen3")
    return dict(tts=build_tiny_tts(root / "tts"), whisper=build_tiny_whisper(root / "whisper"),
                **build_tiny_datasets(root / "data"))


@pytest.fixture(scope="session")
def qwen3_params(qwen3_tiny):
    """RunParams of the qwen3 backend on the tiny stand-ins."""
    from qwen3_tiny import tiny_params
    return tiny_params(qwen3_tiny)


@pytest.fixture(scope="module")
def backend(qwen3_tiny):
    """The qwen3 backend loaded from the tiny saved checkpoint (tests/qwen3_tiny.py), on one thread."""
    from helpers.experiment.run.backend_factory import load_backend
    from qwen3_tiny import tiny_params
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_backend(tiny_params(qwen3_tiny))
    torch.set_num_threads(threads)


SLOW_TEST_SECONDS = 60          # a test that takes longer is named as it ends, with the session's time so far
SESSION_START = time.time()


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    """A test over `SLOW_TEST_SECONDS` gets a line of its own (name, seconds, the session's minutes so far, memory
    available): where a run's time goes shows in its log even when something stops it before the summary."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")          # the controller says it, for every worker's tests
    if report.when != "teardown" and report.duration >= SLOW_TEST_SECONDS and not worker:
        print(f"\n[slow] {report.nodeid} {report.when} {report.outcome} in {report.duration:.0f} s; session "
              f"{(time.time() - SESSION_START) / 60:.0f} min; {available_gib()} GiB available", flush=True)


def available_gib() -> str:
    """MemAvailable of /proc/meminfo in GiB ("?" where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
        return f"{kib / 2**20:.1f}"
    except (OSError, StopIteration):
        return "?"
