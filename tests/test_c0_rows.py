"""E0's rows checked distinct when a model loads (helpers.adapter.c0_rows): the inner loop finds c0 by its row."""

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from helpers.adapter.c0_rows import check_c0_rows
from helpers.adapter.tiny import build_tiny_talker
from conftest import SPECS

E0 = "talker.model.codec_embedding.weight"


def talker():
    return build_tiny_talker(SPECS["h64"], seed=1, dtype=torch.float64)


def test_distinct_rows_pass_and_a_copied_row_is_refused():
    t = talker()
    check_c0_rows(t)
    with torch.no_grad():
        t.get_input_embeddings().weight[5] = t.get_input_embeddings().weight[3]
    with pytest.raises(ValueError, match=r"row 3 equals row\(s\) \[5\].*exact row match"):
        check_c0_rows(t)


def test_rows_the_talker_never_hands_over_may_coincide():
    t = talker()
    e0, vocab = t.get_input_embeddings().weight, t.code_predictor.config.vocab_size
    assert e0.shape[0] > vocab + 1
    with torch.no_grad():
        e0[vocab + 1] = e0[vocab]                       # two rows beyond c0's codebook (and not end or pad)
    check_c0_rows(t)


def test_rows_are_compared_in_the_narrower_dtype():
    t = talker()
    with torch.no_grad():
        e0 = t.get_input_embeddings().weight
        e0[7] = e0[2] * (1 + 1e-6)                      # distinct in float64, one row in bfloat16
    check_c0_rows(t)
    with pytest.raises(ValueError, match="bfloat16"):
        check_c0_rows(t, torch.bfloat16)


def test_a_checkpoint_with_duplicate_rows_is_refused_at_load(tmp_path):
    """The qwen3 backend refuses it when it loads, not at the first synthesised frame."""
    from helpers.backends.qwen3.backend import Qwen3Backend
    from helpers.experiment.run.backend_factory import qwen3_data
    from qwen3_tiny import build_tiny_tts, tiny_params

    folder = build_tiny_tts(tmp_path / "tts")
    weights = load_file(folder / "model.safetensors")
    weights[E0][9] = weights[E0][4]
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    data = qwen3_data(tiny_params(dict(tts=folder, voxpopuli=tmp_path, librispeech=tmp_path, fleurs=tmp_path,
                                       whisper=tmp_path)))
    with pytest.raises(ValueError, match=r"row 4 equals row\(s\) \[9\]"):
        Qwen3Backend.load(str(folder), "cpu", "float64", data=data)
    shutil.rmtree(folder)
