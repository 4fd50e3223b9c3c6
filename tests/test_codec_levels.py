"""Per-level codec statistics: a level that copies the one below, one that repeats its previous frame and one that is
noise each show as such, and the usage of a uniform level is 1."""

import math

import pytest
import torch

from helpers.report.nb01_data import level_statistics


def _utterances(n: int, frames: int, gen: torch.Generator) -> list[torch.Tensor]:
    out = []
    for _ in range(n):
        u = torch.randint(0, 16, (frames, 16), generator=gen)
        u[:, 1] = u[:, 0]                                   # c1 = c0: known from the level below
        u[1:, 2] = u[0, 2]                                  # c2 is constant within an utterance: its previous frame
        out.append(u)
    return out


def test_levels_show_what_predicts_them():
    gen = torch.Generator().manual_seed(0)
    rows = level_statistics(_utterances(200, 50, gen), _utterances(40, 50, gen), [16] * 16)
    bits = math.log2(16)
    assert rows[0]["H_given_lower"] is None and [r["level"] for r in rows] == list(range(16))
    noise = rows[5]
    assert noise["usage"] == pytest.approx(1.0, abs=0.01) and noise["H"] == pytest.approx(bits, abs=0.05)
    assert noise["H_given_lower"] == pytest.approx(bits, abs=0.1) and noise["H_given_previous_frame"] == pytest.approx(bits, abs=0.1)
    assert rows[1]["H_given_lower"] < 0.2 and rows[1]["H_given_previous_frame"] > bits - 0.1
    assert rows[2]["H_given_previous_frame"] < 0.3 and rows[2]["H_given_lower"] > bits - 0.2


def test_out_of_codebook_codes_are_clipped_and_empty_input_refused():
    gen = torch.Generator().manual_seed(1)
    train = _utterances(20, 20, gen)
    train[0][0, 3] = 40                                    # beyond a 16-code codebook: counted as the last code
    assert len(level_statistics(train, _utterances(5, 20, gen), [16] * 16)) == 16
    with pytest.raises(ValueError, match="needs training and held-out"):
        level_statistics([], train, [16] * 16)
