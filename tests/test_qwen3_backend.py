"""The qwen3 backend on tiny stand-ins, through the entry points the real checkpoint uses: load by path, samples
from `datasets`, teacher forcing, offsets training, calibration, speculative synthesis with audio out, Whisper
transcripts; and the clear errors."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from qwen_tts.core.models import Qwen3TTSForConditionalGeneration

from helpers.method.calibration import acceptance_table, expected_tokens_per_step, greedy_tree
from helpers.method.decoding import Decoder
from helpers.method.drafters import PositionOffsets, ReusedHeads
from helpers.experiment.run.params import ParamsError
from helpers.backends.qwen3.backend import Qwen3Backend
from helpers.backends.qwen3.data import load_records
from helpers.experiment.run.backend_factory import load_backend, qwen3_data
from helpers.method.sampler import SamplerConfig
from helpers.method.training import TrainConfig, train_drafter
from qwen3_tiny import tiny_params


@pytest.fixture(scope="module")
def trained(backend):
    """Offsets trained on teacher-forced VoxPopuli stand-ins; tree calibrated on LibriSpeech stand-ins."""
    predictor = backend.predictor
    g, codes = backend.teacher_forced(backend.samples("train"))
    drafter = PositionOffsets(predictor, depth=3)
    history = train_drafter(drafter, predictor.teacher_forced_hidden(g, codes), codes,
                            TrainConfig(epochs=20, lr=3e-2, batch_size=16), progress=False).loss_history
    g_cal, codes_cal = backend.teacher_forced(backend.samples("calibration"))
    table = acceptance_table(drafter, predictor.teacher_forced_hidden(g_cal, codes_cal), codes_cal, width=4)
    return drafter, history, table, greedy_tree(table, 16)


def test_loads_the_checkpoint_with_the_official_settings(backend, qwen3_params):
    P = qwen3_params
    assert isinstance(backend.model, Qwen3TTSForConditionalGeneration) and backend.model.dtype == torch.float64
    assert backend.speech_tokenizer.get_model_type() == "qwen3_tts_tokenizer_12hz"
    assert (backend.sample_rate, backend.frames_per_second) == (24000, 12.5)
    assert backend.languages == {"en": "english", "ja": "japanese"} and backend.non_streaming_mode
    s = backend.talker_sampling
    assert (s["top_k"], s["subtalker_top_k"], s["temperature"], s["subtalker_temperature"]) == (
        P.top_k, P.top_k, P.temperature, P.temperature)
    assert s["repetition_penalty"] == 1.05 and "max_new_tokens" not in s          # from generation_config.json


def test_samples_per_role(backend):
    roles = {role: backend.samples(role) for role in ("train", "validation", "calibration", "evaluation")}
    assert [len(roles[r]) for r in roles] == [8, 4, 3, 2]
    assert not {s.id for s in roles["train"]} & {s.id for s in roles["validation"]}
    assert [s.lang for s in roles["evaluation"]] == ["en", "ja"]
    assert all(s.text[0].isupper() and s.text[1:].islower() for s in roles["calibration"])   # LibriSpeech casing
    tok = backend.tts.processor.tokenizer
    for s in roles["train"] + roles["evaluation"]:
        assert tok.decode(s.input_ids[0, 3:-5]) == s.text and s.speaker == "ryan"
        assert s.codes.shape[1] == 16 and abs(s.codes.shape[0] - s.seconds * 12.5) <= 1
    audio, rate = backend.records("validation")[1].load()
    official = backend.speech_tokenizer.encode(audio, sr=rate).audio_codes[0]
    assert rate == 16000 and torch.equal(roles["validation"][1].codes, official)
    table = backend.dataset_table()
    assert [(r["stage"], r["language"], r["samples"]) for r in table] == [
        ("train", "english", 8), ("validation", "english", 4), ("calibration", "english", 3),
        ("evaluation", "english", 1), ("evaluation", "japanese", 1)]
    assert table[0]["frames"] == sum(s.codes.shape[0] for s in roles["train"]) and table[0]["hours"] > 0


def test_offsets_train_and_calibrate_a_tree(backend, trained):
    drafter, history, table, tree = trained
    assert history[-1] < history[0]
    g, codes = backend.teacher_forced(backend.samples("validation"))
    h = backend.predictor.teacher_forced_hidden(g, codes)
    with torch.no_grad():
        assert drafter.loss(h, codes) < ReusedHeads(backend.predictor).loss(h, codes)   # held-out utterances
    assert table.shape == (3, 4) and tree.size == 16 and tree.max_depth <= 3
    assert expected_tokens_per_step(tree, table) > 1.0


def test_speculative_synthesis_gives_audio_and_transcripts(backend, trained, qwen3_params):
    P = qwen3_params
    decoder = Decoder(backend.predictor, SamplerConfig(P.top_k, P.top_p, P.temperature), trained[0], trained[3])
    for sample in backend.samples("evaluation"):
        ar, spec = backend.synthesize(sample, "ar", seed=3), backend.synthesize(sample, decoder, seed=3)
        assert torch.equal(ar.codes, spec.codes) and len(spec.calls) >= 2
        assert spec.tokens_per_step > 1.0
        audio = backend.decode(spec.codes)
        assert audio.shape == (spec.codes.shape[0] * 1920,) and np.isfinite(audio).all() and np.abs(audio).max() > 0
        hyp = backend.transcribe([audio], sample.lang)
        assert len(hyp) == 1 and isinstance(hyp[0], str)
        assert backend.error_rate([sample.text], hyp, sample.lang) >= 0.0
    reference, rate = backend.records("evaluation")[0].load()                 # dataset audio at its own rate
    assert rate == 16000 and isinstance(backend.transcribe([reference], "en", rate=rate)[0], str)


def test_clear_errors(backend, qwen3_tiny, tmp_path, qwen3_params):
    P = qwen3_params
    with pytest.raises(ValueError, match="not a Qwen3-TTS checkpoint: no readable config.json"):
        load_backend(tiny_params(qwen3_tiny, model_id_or_path=str(tmp_path)))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match="model_type='bert', expected 'qwen3_tts'"):
        load_backend(tiny_params(qwen3_tiny, model_id_or_path=str(tmp_path)))
    v1 = tmp_path / "25hz"
    shutil.copytree(qwen3_tiny["tts"], v1)
    config = json.loads((v1 / "config.json").read_text())
    (v1 / "config.json").write_text(json.dumps({**config, "tokenizer_type": "qwen3_tts_tokenizer_25hz"}))
    with pytest.raises(ValueError, match="needs a 12 Hz model.*not a 25 Hz one"):
        load_backend(tiny_params(qwen3_tiny, model_id_or_path=str(v1)))
    with pytest.raises(ValueError, match="unknown language 'fr' for backend qwen3; allowed: en, ja"):
        backend.language("fr")
    with pytest.raises(ParamsError, match="languages=.*'fr'"):
        tiny_params(qwen3_tiny, languages=["en", "fr"])
    with pytest.raises(ValueError, match="unknown speaker 'zoe'; this checkpoint has anna, ryan"):
        Qwen3Backend(backend.tts, qwen3_data(P), speaker="zoe")
    with pytest.raises(ValueError, match="only 12 usable utterances.*104 needed"):
        Qwen3Backend(backend.tts, qwen3_data(tiny_params(qwen3_tiny, train_samples=100))).records("train")
    with pytest.raises(ParamsError, match="fleurs_id: give a hub id or a local folder"):
        tiny_params(qwen3_tiny, fleurs_id=" ")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="device='cuda' was asked for, but CUDA is not available"):
            load_backend(tiny_params(qwen3_tiny, device="cuda"))
    assert P.device == "cpu"


def test_the_parquet_conversion_layout_reads_like_the_hub_layout(qwen3_tiny):
    """FLEURS as refs/convert/parquet lays it out (<config>/<split>/0000.parquet, no README), through fleurs_data_dir:
    the same utterances as the hub layout with configs."""
    def records(**kw):
        return [(r.id, r.lang, r.text, r.audio) for r in load_records(qwen3_data(tiny_params(qwen3_tiny, **kw)), "evaluation")]

    converted = records(fleurs_id=str(qwen3_tiny["fleurs_parquet_conversion"]), fleurs_data_dir="{config}")
    assert converted == records() and {lang for _, lang, _, _ in converted} == {"en", "ja"}


def test_a_loading_script_dataset_names_the_parameters_to_set(qwen3_tiny):
    P = qwen3_data(tiny_params(qwen3_tiny, fleurs_id=str(qwen3_tiny["fleurs_script"])))
    with pytest.raises(ValueError, match=r"is a dataset loading script, which datasets 4\.5\.0 no longer runs.*"
                                         r"set fleurs_revision: refs/convert/parquet and fleurs_data_dir: '\{config\}'"):
        load_records(P, "evaluation")
    with pytest.raises(ParamsError, match="fleurs_data_dir='{lang}': a folder, where only '{config}' may be replaced"):
        tiny_params(qwen3_tiny, fleurs_data_dir="{lang}")


def test_a_missing_cuda_device_says_why_and_what_to_install():
    """The build, the driver and what to do: a CPU build, no driver, a driver too old for the build's CUDA (the
    pinned torch is a CUDA 13 build), and a driver new enough with no device visible."""
    from helpers.backends.qwen3.backend import cuda_unavailable_reason
    assert "a CPU build" in cuda_unavailable_reason(build="", driver="13.0")
    assert "no NVIDIA driver was found" in cuda_unavailable_reason(build="13.0", driver=None)
    assert cuda_unavailable_reason()                                   # this machine's, whatever it has
    old = cuda_unavailable_reason(build="13.0", driver="12.4")
    assert "supports CUDA 12.4, older than the CUDA 13.0" in old and "R580 or newer" in old and "whl/cu124" in old
    assert "CUDA_VISIBLE_DEVICES" in cuda_unavailable_reason(build="13.0", driver="13.0")
