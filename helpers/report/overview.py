"""Notebook 00's material: what the drafters cost, and one frame decoded step by step."""

from __future__ import annotations

import torch
from torch import nn

from helpers.method.predictor import CodePredictor
from helpers.method.decoding import SpeculativeDecoder, decode_frame_ar
from helpers.method.drafters import DRAFTERS, make_drafter
from helpers.method.round import SamplerConfig, frame_uniforms
from helpers.method.tree import SparseTree


def real_shape_predictor() -> CodePredictor:
    """The Qwen3-TTS-12Hz-0.6B code predictor's shape on the meta device (no memory, no weights).

    qwen_tts's default code-predictor config (hidden 1024, 5 layers, vocab 2048) with the 12 Hz model's
    16 code groups; the talker's codec embedding E0 is 3072 x 1024.
    """
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSTalkerConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSTalkerCodePredictorModelForConditionalGeneration

    config = Qwen3TTSTalkerConfig()
    config.code_predictor_config.num_code_groups = config.num_code_groups = 16
    with torch.device("meta"):
        official = Qwen3TTSTalkerCodePredictorModelForConditionalGeneration(config.code_predictor_config, config)
        return CodePredictor(official, nn.Embedding(config.vocab_size, config.hidden_size), max_query=65)


def parameter_total(module: torch.nn.Module) -> int:
    """The number of parameters of `module` (every tensor of `module.parameters()`, shared ones once)."""
    return sum(p.numel() for p in module.parameters())


def parameter_counts(predictor: CodePredictor, depth: int = 3) -> list[dict]:
    """Rows: the code predictor, then each drafter's added parameters (absolute and relative to the predictor)."""
    with torch.device(predictor.device):
        base = parameter_total(predictor.official)
        rows = [{"module": "code predictor (frozen)", "parameters": base, "of predictor": 1.0}]
        for kind in DRAFTERS:
            added = make_drafter(kind, predictor, depth).added_params
            rows.append({"module": f"drafter: {kind}", "parameters": added, "of predictor": added / base})
    return rows


def frame_walkthrough(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, drafter_kind: str = "reused",
                      depth: int = 3, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """One frame decoded twice from the same uniforms: AR (15 calls) and speculative with a chain tree of `depth`.

    g [1, H_talker], c0 [1]. Returns (AR rows: call, code position, code; speculative rows: round, start
    position, drafts, accepted, codes emitted). Both emit the same c1..c15 (checked).
    """
    sampler = SamplerConfig()
    u = frame_uniforms(torch.Generator().manual_seed(seed), predictor.num_codes, batch=1, device=predictor.device)
    ar = decode_frame_ar(predictor, g, c0, sampler, u).codes[0].tolist()
    spec = SpeculativeDecoder(predictor, make_drafter(drafter_kind, predictor, depth), SparseTree.chain(depth),
                              sampler).decode_frame(g, c0, u)
    if spec.codes[0].tolist() != ar:
        raise RuntimeError("speculative and AR decoding of the same frame differ: losslessness broken")
    ar_rows = [{"call": t, "position": f"c{t}", "code": code} for t, code in enumerate(ar, 1)]
    spec_rows = [{"round": 0, "feeds": "g, c0 (prefill)", "top-1 drafts": "-", "accepted": "-", "emitted": f"c1={ar[0]}"}]
    drafts, t = {start: cand for start, cand in spec.drafts}, 1
    for i, accepted in enumerate(spec.accepted, 1):
        cand = drafts.get(t)
        spec_rows.append({"round": i, "feeds": f"c{t}" + ("" if cand is None else " + drafts"),
                          "top-1 drafts": "-" if cand is None else cand[:, 0].tolist(), "accepted": accepted,
                          "emitted": ", ".join(f"c{t + 1 + k}={c}" for k, c in enumerate(ar[t:t + accepted + 1]))})
        t += accepted + 1
    return ar_rows, spec_rows


def miniature_origin(build_s: dict, preset: str, build_seed: int, cache: str, shipped: list[str] = (),
                     built_on: str = "measured on the machine that built the miniature") -> str:
    """Notebook 00's sentence on where the miniature came from and how long its build took. build_s: seconds per
    build step ({"speech", "codec", "model"}: `Mini.history["build_s"]`, None for a step built before timing);
    shipped: the steps copied from the trained miniature committed with the repository (`Mini.history["shipped"]`);
    built_on: where the times were measured (`helpers.report.built_on.built_on`)."""
    if not build_s:
        raise ValueError("build_s: the miniature's seconds per build step, e.g. {'speech': 19.4, ...}; got nothing")
    timed = {k: v for k, v in build_s.items() if v is not None}
    took = (", ".join(f"{k} {v:.0f} s" for k, v in timed.items()) + f" ({sum(timed.values()) / 60:.1f} min in all)"
            if timed else "not timed (built before build times were recorded)")
    untimed = [k for k, v in build_s.items() if v is None]
    here = [k for k in build_s if k not in shipped]
    here_on = "measured on the machine that ran this run's build step"
    where = "; ".join(part for part in (f"{' and '.join(shipped)} {built_on}" if shipped else "",
                                        f"{', '.join(here)} {here_on}" if here else "") if part)
    origin = (f" The {' and '.join(shipped)} steps were trained by `make mini` and ship with the repository "
              "(`mini_trained`): they were copied because their keys, which hash every build parameter and the "
              "speech's content, are the ones this code builds; their times below are that build's."
              if shipped else "")
    return (f"**Where the miniature comes from.** Preset `{preset}`, `mini_build_seed` {build_seed}: espeak-ng speech "
            "of synthetic sentences in the run's languages, an RVQ codec fitted to it, and the official Qwen3-TTS "
            "classes trained on its codes. It is built once, before the first notebook, as the runner's own step "
            "(`python -m helpers PARAMS --build` runs only that step; a notebook opened without the runner builds it "
            f"on first use), and cached in `{cache}`.{origin} Its build took ({where}): {took}"
            + (f"; {', '.join(untimed)} not timed" if untimed and timed else "") + ".")
