"""Sound examples as WAV files with short players (helpers.experiment.run.audio): nothing embedded, paths relative."""

import wave

import numpy as np
import pytest

from helpers.experiment.run.params import load_params
from helpers.experiment.run.quiet import PROGRESS_ENV
from helpers.experiment.run.audio import players, save_clip, write_wav


def test_a_wav_holds_the_clip_scaled_to_its_peak(tmp_path):
    x = 0.25 * np.sin(np.linspace(0, 20, 800))
    path = write_wav(tmp_path / "a.wav", x, 16000)
    with wave.open(str(path)) as f:
        assert (f.getnchannels(), f.getsampwidth(), f.getframerate(), f.getnframes()) == (1, 2, 16000, 800)
        pcm = np.frombuffer(f.readframes(800), dtype="<i2")
    assert np.abs(pcm).max() == 32767 and np.allclose(pcm / 32767, x / 0.25, atol=1e-4)
    with pytest.raises(ValueError, match="finite samples"):
        write_wav(tmp_path / "b.wav", [np.nan], 16000)


def test_the_player_src_is_relative_to_where_the_notebook_is_read(tmp_path, monkeypatch):
    P = load_params(None, {"output_dir": str(tmp_path), "run_name": "r"})
    monkeypatch.setenv(PROGRESS_ENV, str(tmp_path / "log"))           # under the runner: the run folder
    assert save_clip(P, np.ones(10), 8000, "05_en_0_ar") == "audio/05_en_0_ar.wav"
    assert (tmp_path / "r" / "audio" / "05_en_0_ar.wav").is_file()
    monkeypatch.delenv(PROGRESS_ENV)                                  # JupyterLab: notebooks/
    assert save_clip(P, np.ones(10), 8000, "x").endswith("/r/audio/x.wav")


def test_players_escape_the_text_and_embed_nothing():
    page = players("en: a <b> & c", {"AR": "audio/a.wav", "speculative": "audio/s.wav"})
    assert page.startswith("<p><b>en</b>: a &lt;b&gt; &amp; c</p>")
    assert page.count('<audio controls preload="none" src="audio/') == 2 and "base64" not in page
    with pytest.raises(ValueError):
        players("x", {})
