"""The miniature's build: codec hierarchy, determinism, cache reuse and invalidation, whole-utterance
losslessness through the official generate, and clear errors."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from helpers.method.predictor import CodePredictor
from helpers.method.calibration import greedy_tree
from helpers.method.decoding import Decoder
from helpers.method.drafters import ReusedHeads
from helpers.backends.mini.build import SMOKE, MiniBuildConfig, build_mini
from helpers.backends.mini.codec import CodecConfig, fit_codec
from helpers.backends.mini.backend import MiniBackend
from helpers.method.diagnostics import codebook_usage
from helpers.backends.mini.speech import speak_all
from helpers.backends.mini.train import MiniTrainConfig, train_mini, validation_losses
from helpers.artifacts import load_tensors
from helpers.method.sampler import SamplerConfig

from drafting import TABLE


@pytest.fixture(scope="module")
def built(smoke_cache):
    cache = smoke_cache / "mini"
    logs = []
    mini = build_mini(SMOKE, cache, log=logs.append)
    return mini, cache, logs


def test_codec_error_falls_with_stages(built):
    mini, _, _ = built
    errors = mini.history["stage_errors"]["pretrain_val"]
    assert len(errors) == 17 and errors[0] > 0.9
    assert all(later < earlier for earlier, later in zip(errors, errors[1:]))
    item = mini.items["evaluation"][0]
    audio = mini.codec.decode(item.codes.numpy())
    assert abs(audio.shape[0] - item.codes.shape[0] * 1280) <= 160 and float(np.abs(audio).max()) > 0.01


def test_items_cover_roles_and_languages(built):
    mini, _, _ = built
    assert {it.lang for it in mini.items["evaluation"]} == {"en", "de", "es", "ru", "ja", "zh"}
    assert {it.lang for it in mini.items["offsets_train"] + mini.items["calibration"]} == {"en"}
    for it in mini.items["pretrain"][:5]:
        assert len(it.phonemes) == it.codes.shape[0] and it.codes.shape[1] == 16


def test_cache_reused_and_invalidated(built, tmp_path):
    mini, cache, _ = built
    logs = []
    again = build_mini(SMOKE, cache, log=logs.append)
    assert [line.split(":")[0] for line in logs] == ["speech", "codec", "model"] and all("cached" in l for l in logs)
    for a, b in zip(mini.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)
    logs.clear()
    changed = replace(SMOKE, codec=replace(SMOKE.codec, kmeans_iters=3), train=replace(SMOKE.train, epochs=1))
    build_mini(changed, cache, log=logs.append)
    assert logs == [next(l for l in logs if l.startswith("speech"))]          # only speech was reused
    assert len(list(cache.glob("codec-*"))) == 2 and len(list(cache.glob("model-*"))) == 2


def test_two_builds_are_identical(built, tmp_path):
    """Two builds into two cache folders give the same codec and model tensors, whatever the caller's thread count
    (the build runs on one thread and restores the caller's)."""
    mini, _, _ = built
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        again = build_mini(SMOKE, tmp_path / "again", log=lambda line: None)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert [f.name for f in again.folders.values()] == [f.name for f in mini.folders.values()]
    for name in ("codec.safetensors", "codes.safetensors"):
        a, b = (load_tensors(m.folders["codec"] / name) for m in (mini, again))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    a, b = (load_tensors(m.folders["model"] / "model.safetensors") for m in (mini, again))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert {k: v for k, v in again.history["training"].items() if k != "seconds"} == \
        {k: v for k, v in mini.history["training"].items() if k != "seconds"}


def test_training_history_has_held_out_curves(built):
    """Held-out CE at intervals for both phases; the code-predictor phase keeps the weights of its best check."""
    mini, _, _ = built
    history, train = mini.history["training"], SMOKE.train
    joint = [v for v in history["validation"] if v["phase"] == "joint"]
    phase2 = [v for v in history["validation"] if v["phase"] == "predictor"]
    assert [v["step"] for v in joint][0] == 0 and joint[-1]["step"] == len(history["talker_loss"])
    assert [v["step"] for v in phase2] == list(range(0, train.predictor_steps + 1, train.val_every))
    assert len(history["predictor_phase_loss"]) == train.predictor_steps and set(history["seconds"]) == {"joint", "predictor"}
    best = min(phase2, key=lambda v: v["predictor"])
    assert history["predictor_best_step"] == best["step"] and best["predictor"] <= phase2[0]["predictor"]
    assert joint[-1]["talker"] < joint[0]["talker"] and phase2[-1]["talker"] == phase2[0]["talker"]
    val = [mini.utterance(it) for it in mini.items["pretrain_val"]]
    _, ce = validation_losses(mini.model.float(), val)
    assert abs(float(ce.mean()) - best["predictor"]) < 1e-4
    with pytest.raises(ValueError, match="predictor_steps > 0 needs held-out utterances"):
        train_mini(mini.model, val, SMOKE.train)
    with pytest.raises(ValueError, match="predictor_steps must be an integer >= 0"):
        MiniTrainConfig(predictor_steps=-1)
    with pytest.raises(ValueError, match="predictor_steps must be 0 or at least 11"):
        MiniTrainConfig(predictor_steps=10)
    with pytest.raises(ValueError, match="make 3 steps; the one-cycle schedule needs at least 11"):
        train_mini(mini.model, val[:8], MiniTrainConfig(epochs=3, batch_size=8))


def test_speech_and_codec_are_deterministic(built):
    mini, _, _ = built
    items = [(it.lang, it.text, it.speaker) for it in mini.items["pretrain"][:30]]
    first, second = speak_all(items), speak_all(items)
    assert all(np.array_equal(a.audio, b.audio) and a.phonemes == b.phonemes for a, b in zip(first, second))
    feats = [mini.codec.features(s.audio) for s in first]
    phonemes = [s.phonemes for s in first]
    cfg = CodecConfig(sizes=(256,) + (4,) * 15, pca_dim=16, kmeans_iters=3)
    c1, c2 = fit_codec(feats, cfg, phonemes), fit_codec(feats, cfg, phonemes)
    assert all(np.array_equal(c1.encode_features(f, p), c2.encode_features(f, p)) for f, p in zip(feats, phonemes))
    assert np.array_equal(mini.codec.encode(first[0].audio, first[0].phonemes), mini.items["pretrain"][0].codes.numpy())


def test_semantic_c0_is_the_frame_phoneme(built, tmp_path):
    """c0 of the default codec is the phoneme at the frame (one code per symbol of the text vocabulary, its codeword
    the phoneme's mean latent), the residual stages code what it leaves, and the codec reads back the same."""
    mini, _, _ = built
    codec = mini.codec
    assert codec.config.c0 == "phoneme" and codec.sizes[0] == len(codec.symbols) <= SMOKE.model.codec_size
    assert codec.symbols == sorted({p for role in mini.items.values() for it in role for p in it.phonemes})
    for it in mini.items["evaluation"][:3]:
        assert [codec.symbols[c] for c in it.codes[:, 0].tolist()] == it.phonemes
    errors = mini.history["stage_errors"]["pretrain_val"]
    assert errors[16] < errors[1] < errors[0]                       # the acoustic stages refine the phoneme's mean
    codec.save(tmp_path / "c.safetensors")
    again = type(codec).load(tmp_path / "c.safetensors")
    item = mini.items["pretrain"][1]
    assert again.symbols == codec.symbols and np.array_equal(again.encode(mini.audio(item), item.phonemes),
                                                              item.codes.numpy())
    with pytest.raises(ValueError, match="pass one phoneme per frame"):
        codec.encode(mini.audio(item))
    with pytest.raises(ValueError, match="phonemes outside the codec's c0 symbols"):
        codec.encode(mini.audio(item), ["not-a-phoneme"] * item.codes.shape[0])
    feats = [codec.features(mini.audio(it)) for it in mini.items["pretrain"][:4]]
    with pytest.raises(ValueError, match="a phoneme c0 needs one phoneme per frame"):
        fit_codec(feats, SMOKE.codec)
    with pytest.raises(ValueError, match=r"number at most sizes\[0\]=4"):
        fit_codec(feats, CodecConfig(sizes=(4,) * 16), [it.phonemes for it in mini.items["pretrain"][:4]])
    with pytest.raises(ValueError, match="c0 must be one of phoneme, kmeans"):
        CodecConfig(c0="text")
    with pytest.raises(ValueError, match="need model.codec_size >= that"):
        replace(SMOKE, model=replace(SMOKE.model, codec_size=32))


def test_residual_design_quantises_the_whole_residual(built):
    """design="residual": every stage codes all components (a plain RVQ of one latent); the error still falls."""
    mini, _, _ = built
    feats = [mini.codec.features(mini.audio(it)) for it in mini.items["pretrain"][:12]]
    cfg = CodecConfig(sizes=(16,) + (4,) * 15, pca_dim=16, kmeans_iters=3, design="residual", c0="kmeans")
    codec = fit_codec(feats, cfg)
    assert all(np.array_equal(d, np.arange(16)) for d in codec.dims)
    errors = codec.stage_errors(np.concatenate(feats))
    assert errors[16] < errors[1] < errors[0]
    with pytest.raises(ValueError, match="design must be one of group, residual, got 'pca'"):
        CodecConfig(design="pca")


def test_speculative_equals_ar_over_whole_utterances(built):
    mini, _, _ = built
    model = mini.model.double()
    predictor = CodePredictor.from_talker(model.talker)
    decoder = Decoder(predictor, SamplerConfig(), ReusedHeads(predictor), greedy_tree(TABLE, 16))
    backend = MiniBackend(mini, ["en", "de", "es", "ru", "ja", "zh"])
    samples = backend.samples("evaluation")[:4]
    ar = [backend.synthesize(s, "ar", seed=7) for s in samples]
    spec = [backend.synthesize(s, decoder, seed=7) for s in samples]
    for a, s in zip(ar, spec):
        assert torch.equal(a.codes, s.codes) and a.codes.shape[0] >= 2
    assert sum(map(sum, (s.calls for s in spec))) < sum(map(sum, (a.calls for a in ar)))
    mini.model.float()


def test_clear_errors():
    with pytest.raises(ValueError, match="unknown speaker 'nobody'"):
        MiniBuildConfig(eval_speaker="nobody")
    with pytest.raises(ValueError, match="pretrain must be an integer >= 1"):
        MiniBuildConfig(pretrain=0)
    with pytest.raises(ValueError, match="16 codebook sizes"):
        CodecConfig(sizes=(8, 8))
    with pytest.raises(ValueError, match="unknown language 'xx'"):
        speak_all([("xx", "hello", "f5")])
    with pytest.raises(ValueError, match="text is empty"):
        speak_all([("en", "   ", "f5")])
    with pytest.raises(ValueError, match="limit is 300"):
        speak_all([("en", "a" * 301, "f5")])
    with pytest.raises(ValueError, match="unknown speaker 'zoe'"):
        speak_all([("en", "hello", "zoe")])


def test_backend_roles_and_dataset_table(built):
    mini, _, _ = built
    backend = MiniBackend(mini, ["en", "ja"])
    assert len(backend.samples("train")) == SMOKE.offsets_train and len(backend.samples("calibration")) == SMOKE.calibration
    assert {s.lang for s in backend.samples("evaluation")} == {"en", "ja"}
    rows = backend.dataset_table()
    assert [r["stage"] for r in rows] == ["train", "validation", "calibration", "evaluation", "evaluation"]
    assert all(r["frames"] > 0 and r["hours"] > 0 for r in rows)
    assert backend.has_asr("en") and not backend.has_asr("ja")
    assert backend.codebook_sizes == list(SMOKE.codec.sizes[1:])        # the codec's, not the predictor's vocabulary
    codes = torch.cat([s.codes for s in backend.samples("validation")])
    usage = codebook_usage(codes[:, 1:], backend.codebook_sizes)           # ground-truth codes fit their codebooks
    assert bool((usage.entropy_bits <= usage.max_bits + 1e-9).all()) and usage.max_bits[-1] == 3.0
    with pytest.raises(ValueError, match="unknown role 'test'; allowed: train, validation, calibration, evaluation"):
        backend.samples("test")
    with pytest.raises(ValueError, match="unknown language 'de' for backend mini; allowed: en, ja"):
        backend.language("de")
    mini.model.float()


def test_the_run_seed_reuses_the_built_miniature(built, smoke_cache):
    """`seed` varies sampling and data order only: the same cached build; `mini_build_seed` is the build's."""
    from helpers.experiment.run.params import load_params
    from helpers.experiment.run.backend_factory import load_backend

    backends = [load_backend(load_params("params/smoke.yaml", {"cache_dir": str(smoke_cache), "seed": s}))
                for s in (0, 7)]
    assert backends[0].mini.folders == backends[1].mini.folders == built[0].folders
    assert backends[1].mini.config.seed == 0
    P = load_params("params/smoke.yaml", {"mini_build_seed": 3})
    assert P.seed == 0 and P.mini_build_seed == 3
