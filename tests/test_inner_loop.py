"""The official generate with our inner loop: teacher forcing reproduces its hidden states, and the
AR and speculative inner loops give the same codes for the same seeds over whole utterances."""

import pytest
import torch

from drafting import TREES, random_drafters
from helpers.method.predictor import CodePredictor
from helpers.method.decoding import Decoder
from helpers.adapter.inner_loop import InnerLoop
from helpers.method.replay import Replay, replay_calls, walk_calls, walk_many
from helpers.adapter.synthesis import Synthesis
from helpers.backends.mini.model import MiniModelSpec, TextVocab, build_mini_model
from helpers.method.sampler import SamplerConfig
from helpers.adapter.talker_inputs import talker_prompt, teacher_forced_inputs

VOCAB = TextVocab(list("abcdefgh"))
SPEC = MiniModelSpec(codec_size=48, talker_hidden=48, talker_layers=2, predictor_hidden=64, predictor_layers=2,
                     num_heads=4, num_kv_heads=2, text_hidden=16)


@pytest.fixture(scope="module")
def model():
    m = build_mini_model(SPEC, VOCAB, ["anna", "bert"], seed=3).double()
    with torch.no_grad():                                       # peaked targets so that drafts get accepted
        for head in m.talker.code_predictor.lm_head:
            head.weight.mul_(20.0)
    return m


def synthesize(model, loop_decoder, seed, text="abcabd", non_streaming=False, frames=10):
    torch.manual_seed(seed)
    with InnerLoop(model.talker, loop_decoder, seed=seed) as loop:
        codes, hidden = model.generate(input_ids=[VOCAB.chat_ids(list(text))], languages=["german"],
                                       speakers=["bert"], non_streaming_mode=non_streaming, max_new_tokens=frames)
    return codes[0], hidden[0], loop


@pytest.mark.parametrize("non_streaming", [False, True])
def test_teacher_forcing_reproduces_generate(model, non_streaming):
    codes, hidden, _ = synthesize(model, "ar", seed=1, non_streaming=non_streaming)
    prompt = talker_prompt(model, VOCAB.chat_ids(list("abcabd")), "german", "bert", non_streaming)
    x, labels = teacher_forced_inputs(model, prompt, codes)
    out = model.talker(inputs_embeds=x, attention_mask=torch.ones(1, x.shape[1], dtype=torch.long),
                       output_hidden_states=True)
    start = prompt.prefix.shape[1] - 1
    g = out.hidden_states[0][-1][0, start:start + codes.shape[0]]
    assert codes.shape[0] >= 2
    assert torch.allclose(g, hidden, rtol=0, atol=1e-10)
    assert labels[-1] == model.config.talker_config.codec_eos_token_id


@pytest.mark.parametrize("tree", ["chain", "sparse16"])
def test_speculative_inner_loop_equals_ar_over_utterances(model, tree):
    predictor = CodePredictor.from_talker(model.talker)
    decoder = Decoder(predictor, SamplerConfig(), random_drafters(predictor)["offsets"], TREES[tree])
    frames = calls = 0
    for seed in range(3):
        ar_codes, _, ar_loop = synthesize(model, "ar", seed)
        spec_codes, _, spec_loop = synthesize(model, decoder, seed)
        assert torch.equal(ar_codes, spec_codes)
        assert ar_loop.calls == [15] * len(ar_loop.calls)
        frames, calls = frames + len(spec_loop.calls), calls + sum(spec_loop.calls)
    assert calls < 15 * frames                                    # drafts were accepted somewhere


def test_switch_restores_the_stock_generate(model):
    cp = model.talker.code_predictor
    stock = cp.generate
    with InnerLoop(model.talker, "ar") as loop:
        assert cp.generate == loop.generate
    assert "generate" not in vars(cp) and cp.generate == stock


def test_clear_errors(model):
    ids = VOCAB.chat_ids(list("ab"))
    with pytest.raises(ValueError, match="unknown language 'klingon'.*english"):
        talker_prompt(model, ids, "klingon", "anna")
    with pytest.raises(ValueError, match="unknown speaker 'zoe'.*anna, bert"):
        talker_prompt(model, ids, "english", "zoe")
    with pytest.raises(ValueError, match="empty text"):
        VOCAB.chat_ids([])
    with pytest.raises(ValueError, match="outside the miniature's text vocabulary"):
        VOCAB.chat_ids(list("xyz"))
    with pytest.raises(ValueError, match="'ar' or a Decoder"):
        InnerLoop(model.talker, "greedy")


def test_replay_reproduces_the_calls_of_a_full_synthesis(model):
    predictor = CodePredictor.from_talker(model.talker)
    decoder = Decoder(predictor, SamplerConfig(), random_drafters(predictor)["offsets"], TREES["sparse16"])
    runs, calls = [], []
    for seed in (4, 5):
        codes, hidden, loop = synthesize(model, decoder, seed=seed)
        runs.append(Synthesis(codes, hidden, loop.calls[:codes.shape[0]]))
        calls.append(loop.calls[:codes.shape[0]])
    replay = replay_calls(decoder, runs, [4, 5])
    assert replay.calls == calls and replay.mismatched == 0 and replay.frames == sum(map(len, calls))
    assert any(c < 15 for frame in calls for c in frame)                  # speculation did something
    with pytest.raises(RuntimeError, match="replay gave other codes"):
        replay_calls(decoder, runs, [5, 4])                               # wrong uniforms: other codes
    counted = replay_calls(decoder, runs, [5, 4], strict=False)           # counted, not raised
    assert 0 < counted.mismatched <= counted.frames == replay.frames


def test_tokens_per_step_by_group_counts_each_groups_frames_and_calls():
    """Table 2 per language: codes over calls of each group's runs (not a mean of per-run ratios)."""
    r = Replay(calls=[[5, 5], [15], [3, 3, 3]], mismatched=0, frames=6)
    assert r.tokens_per_step_by(["en", "de", "en"], 15) == pytest.approx({"en": 15 * 5 / 19, "de": 1.0})
    assert r.tokens_per_step_by(["x"] * 3, 15) == pytest.approx({"x": r.tokens_per_step(15)})
    with pytest.raises(ValueError, match="one label per run: 2 labels for 3 runs"):
        r.tokens_per_step_by(["en", "de"], 15)


@pytest.mark.parametrize("kind", ["reused", "medusa", "offsets", "offsets_prenorm"])
@pytest.mark.parametrize("tree", ["chain", "full2", "sparse4", "sparse32"])
def test_the_walk_over_recorded_codes_gives_the_decoders_calls(model, kind, tree):
    """Exact inner loop: walking the decoder's plans over the recorded codes (no decoding) gives the calls of the
    decoder itself, frame for frame, for every drafter and tree (the evaluation stage's replay rests on it)."""
    predictor = CodePredictor.from_talker(model.talker)
    decoder = Decoder(predictor, SamplerConfig(), random_drafters(predictor)[kind], TREES[tree])
    runs = []
    for seed in (6, 7):
        codes, hidden, _ = synthesize(model, "ar", seed=seed, frames=12)
        runs.append(Synthesis(codes, hidden, [15] * codes.shape[0]))
    walked, decoded = walk_calls(decoder, runs), replay_calls(decoder, runs, [6, 7])
    assert walked.calls == decoded.calls and walked.frames == decoded.frames
    chunked = walk_many({"a": decoder}, runs, chunk=1)["a"]                # as the stage walks: a run at a time
    assert (chunked.calls, chunked.frames) == (walked.calls, walked.frames)
    assert len({c for frame in walked.calls for c in frame}) > 1          # frames differ: not a constant
