"""The miniature's phoneme recogniser: it trains (CTC loss falls), it is a cached build step, it hears the ground
truth better than random codes' audio, a clip's result does not depend on its batch, and clear errors."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from helpers.backends.mini.build import SMOKE, build_mini
from helpers.backends.mini.phoneme_asr import (RecogniserConfig, phoneme_error_rate, recogniser, reference_tokens)


@pytest.fixture(scope="module")
def built(smoke_cache):
    torch.set_num_threads(1)
    mini = build_mini(SMOKE, smoke_cache / "mini")
    rec, history = mini.recogniser()
    return mini, rec, history


def test_training_lowers_the_ctc_loss(built):
    _, _, history = built
    loss = history["loss"]
    assert len(loss) == SMOKE.recogniser.epochs and loss[-1] < 0.5 * loss[0]
    assert history["val_per"][-1] < history["val_per"][0] and history["clips"] == 6 * SMOKE.pretrain


def test_ground_truth_is_heard_better_than_random_codes(built):
    mini, rec, _ = built
    items = mini.items["evaluation"]
    refs = [reference_tokens(it.phonemes) for it in items]
    truth = phoneme_error_rate(refs, rec.recognise([mini.audio(it) for it in items]))
    g = torch.Generator().manual_seed(0)
    sizes = torch.tensor(mini.codec.sizes)
    noise = [mini.codec.decode((torch.rand(it.codes.shape, generator=g) * sizes).long().numpy()) for it in items]
    assert truth < phoneme_error_rate(refs, rec.recognise(noise))


def test_a_clip_is_recognised_alike_alone_and_in_a_batch(built):
    mini, rec, _ = built
    clips = [mini.audio(it) for it in mini.items["evaluation"][:4]]
    assert rec.recognise(clips, batch_size=4) == [rec.recognise([c])[0] for c in clips]


def test_the_step_is_cached_and_keyed_by_its_config(built, smoke_cache):
    mini, rec, history = built
    logs = []
    again, again_history = recogniser(SMOKE.recogniser, mini.folders["speech"], smoke_cache / "mini", logs.append)
    assert len(logs) == 1 and "cached" in logs[0] and again_history == history
    for a, b in zip(rec.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)
    assert mini.recogniser()[0] is mini.recogniser()[0]                   # loaded once per build
    other = replace(SMOKE.recogniser, epochs=1)
    folders = {p.name for p in (smoke_cache / "mini").glob("recogniser-*")}
    logs.clear()
    recogniser(other, mini.folders["speech"], smoke_cache / "mini", logs.append)
    assert not logs and len({p.name for p in (smoke_cache / "mini").glob("recogniser-*")} - folders) == 1


def test_references_and_clear_errors():
    assert reference_tokens(["_", "a", "a", "b", "_:", "b", "_"]) == ["a", "b", "b"]
    assert phoneme_error_rate([["a", "b"]], [["a", "c", "d"]]) == 1.0
    with pytest.raises(ValueError, match="at least one phoneme"):
        phoneme_error_rate([[]], [["a"]])
    with pytest.raises(ValueError, match="hidden must be even"):
        RecogniserConfig(hidden=33)
    with pytest.raises(ValueError, match="non-empty mono"):
        from helpers.backends.mini.phoneme_asr import CTCModel, PhonemeRecogniser
        PhonemeRecogniser(CTCModel(80, 3, 8, 0), ["a", "b", "c"], RecogniserConfig()).recognise([np.zeros((0,))])
