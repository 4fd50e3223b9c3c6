"""The drop-in switch on a checkpoint loaded through `qwen_tts.Qwen3TTSModel`: speculative TTS is one `with`
around `generate_custom_voice`, gives the AR inner loop's exact output, and the switched AR inner loop samples
what the stock one samples."""

import numpy as np
import torch

from drafting import TREES, random_drafters
from helpers.method.decoding import Decoder
from helpers.adapter.inner_loop import InnerLoop
from helpers.method.sampler import SamplerConfig
from helpers.method.parity import two_sample_p


def test_speculative_generate_custom_voice_equals_ar(backend, qwen3_params):
    tts, P = backend.tts, qwen3_params
    decoder = Decoder(backend.predictor, SamplerConfig(P.top_k, P.top_p, P.temperature),
                      random_drafters(backend.predictor)["offsets"], TREES["sparse16"])
    for seed, text in enumerate(["the cat sat on the mat", "a red sun"]):
        out = {}
        for name, inner in (("ar", "ar"), ("spec", decoder)):
            torch.manual_seed(seed)
            with InnerLoop(tts.model.talker, inner, seed=seed) as loop:
                wavs, rate = tts.generate_custom_voice(text, speaker="ryan", language="english", max_new_tokens=12,
                                                       subtalker_temperature=P.temperature, subtalker_top_k=P.top_k)
            out[name] = (wavs, loop.calls)
        assert rate == 24000 and len(out["ar"][0]) == 1 and np.array_equal(out["ar"][0][0], out["spec"][0][0])
        assert all(c == 15 for c in out["ar"][1]) and sum(out["spec"][1]) < sum(out["ar"][1])
    assert "generate" not in vars(tts.model.talker.code_predictor)            # the stock method is back


def _first_frames(backend, n, seed, inner=None, **sampling) -> np.ndarray:
    """codes [n, 16] of the first frame of n utterances of one text, in one batched official generate."""
    ids = backend.tokenize("the big dog ran")
    kwargs = {**backend.talker_sampling, **sampling}
    torch.manual_seed(seed)
    if inner is None:
        codes, _ = backend.model.generate(input_ids=[ids] * n, languages=["english"] * n, speakers=["ryan"] * n,
                                          non_streaming_mode=True, max_new_tokens=2, **kwargs)
    else:
        with InnerLoop(backend.model.talker, inner, seed=seed):
            codes, _ = backend.model.generate(input_ids=[ids] * n, languages=["english"] * n, speakers=["ryan"] * n,
                                              non_streaming_mode=True, max_new_tokens=2, **kwargs)
    return torch.stack([c[0] for c in codes]).numpy()


def test_switched_ar_matches_the_stock_inner_loop_in_distribution(backend):
    n = 1500
    stock = _first_frames(backend, n, seed=1)
    ours = _first_frames(backend, n, seed=2, inner="ar")
    hotter = _first_frames(backend, n, seed=3, inner="ar", subtalker_temperature=1.5)
    for cols in ([1], [2], [1, 2]):
        assert two_sample_p(ours[:, cols], stock[:, cols]) > 1e-3, f"codes {cols} differ from the stock inner loop"
    assert two_sample_p(hotter[:, [1, 2]], stock[:, [1, 2]]) < 1e-3, "the test cannot tell temperatures apart"
