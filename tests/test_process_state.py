"""No constructor or library function changes the process: torch's threads, dynamo's config, the global RNG and the
model it is given stay as they were (the settings that are process-wide are set where a process starts,
`helpers.experiment.run.process`); the results are the ones a seeded global RNG gives."""

import pytest
import torch
import torch._dynamo

from helpers.adapter.global_rng import global_rng
from helpers.adapter.inner_loop import InnerLoop
from helpers.adapter.synthesis import synthesize
from helpers.adapter.tiny import build_tiny_talker
from helpers.backends.mini.model import MiniModelSpec, TextVocab, build_mini_model
from helpers.experiment.run.process import ACCUMULATED_RECOMPILES, MINI_THREADS, process_settings, run_threads
from helpers.method.compiler import CallCompiler

from conftest import SPECS

VOCAB = TextVocab(list("abcdefgh"))
SPEC = MiniModelSpec(codec_size=48, talker_hidden=48, talker_layers=2, predictor_hidden=64, predictor_layers=2,
                     num_heads=4, num_kv_heads=2, text_hidden=16)


def process_state() -> dict:
    """What a library call must leave as it found: threads, dynamo's whole config, the CPU's global RNG."""
    return {"threads": torch.get_num_threads(), "dynamo": torch._dynamo.config.get_config_copy(),
            "rng": torch.random.get_rng_state()}


def assert_unchanged(before: dict) -> None:
    after = process_state()
    assert after["threads"] == before["threads"]
    changed = {k: (v, after["dynamo"][k]) for k, v in before["dynamo"].items() if after["dynamo"][k] != v}
    assert not changed, f"dynamo config changed: {changed}"
    assert torch.equal(after["rng"], before["rng"]), "the global RNG state changed"


@pytest.mark.parametrize("mode", ["none", "inductor"])
def test_a_call_compiler_leaves_dynamo_config_alone(mode):
    before = process_state()
    compiler = CallCompiler(mode, torch.device("cpu"), torch_backend="aot_eager")
    compiler.kernels(Scaled(2))
    assert_unchanged(before)


def test_a_compiled_call_carries_its_own_recompile_limit():
    """Nine modules sharing one forward (as every Round does) compile past dynamo's default limit of 8."""
    compiler = CallCompiler("inductor", torch.device("cpu"), torch_backend="eager")
    before = process_state()
    x = torch.ones(1, 3)
    for width in range(1, 10):                         # the width is a guarded attribute: one compile each
        compiled = compiler.kernels(Scaled(width))
        assert torch.equal(compiled(x), x * width)
    assert torch._dynamo.config.recompile_limit == before["dynamo"]["recompile_limit"] == 8
    assert_unchanged(before)


class Scaled(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.width = width

    def forward(self, x):
        return x * self.width


def test_global_rng_draws_as_manual_seed_and_restores():
    before = process_state()
    with global_rng(5):
        inside = torch.randn(4)
    assert_unchanged(before)
    torch.manual_seed(5)
    assert torch.equal(inside, torch.randn(4))


def test_building_models_leaves_the_global_rng_alone():
    before = process_state()
    a = build_tiny_talker(SPECS["h64"], seed=2)
    m = build_mini_model(SPEC, VOCAB, ["anna", "bert"], seed=3)
    assert_unchanged(before)
    torch.manual_seed(123)                             # another state before: the same weights
    b = build_tiny_talker(SPECS["h64"], seed=2)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    n = build_mini_model(SPEC, VOCAB, ["anna", "bert"], seed=3)
    assert all(torch.equal(x, y) for x, y in zip(m.state_dict().values(), n.state_dict().values()))


def test_synthesis_leaves_the_process_and_the_model_alone_and_draws_as_seeded():
    model = build_mini_model(SPEC, VOCAB, ["anna", "bert"], seed=3).double()
    ids = VOCAB.chat_ids(list("abcabd"))
    config = model.talker.generation_config
    assert config.pad_token_id is None
    before = process_state()
    first = synthesize(model, ids, "german", "bert", "ar", seed=4, max_frames=6)
    assert_unchanged(before)
    assert config.pad_token_id is None
    torch.manual_seed(4)                               # the same draws as a process seeded by hand
    with InnerLoop(model.talker, "ar", seed=4):
        codes, _ = model.generate(input_ids=[ids], languages=["german"], speakers=["bert"], max_new_tokens=6)
    assert first.codes.shape[0] >= 2 and torch.equal(first.codes, codes[0])


def test_process_settings_set_threads_and_the_compile_cap():
    threads = torch.get_num_threads()
    try:
        process_settings(run_threads("mini"))
        assert torch.get_num_threads() == MINI_THREADS == 1
        assert torch._dynamo.config.accumulated_recompile_limit >= ACCUMULATED_RECOMPILES
        process_settings(run_threads("qwen3"))               # None: the threads are left as they are
        assert torch.get_num_threads() == MINI_THREADS
    finally:
        torch.set_num_threads(threads)
    with pytest.raises(ValueError, match="threads must be at least 1"):
        process_settings(0)


def test_loading_the_mini_backend_leaves_the_process_alone(smoke_cache):
    """The miniature's backend (the smoke miniature, built once for the session) on the caller's two threads."""
    from helpers.experiment.run.backend_factory import load_backend
    from helpers.experiment.run.params import load_params
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        before = process_state()
        load_backend(load_params("params/smoke.yaml", {"cache_dir": str(smoke_cache)}))
        assert_unchanged(before)
    finally:
        torch.set_num_threads(threads)
