"""The codec's round trip level by level: the phoneme error rate of the evaluation role's true codes decoded with
only their first k levels (a backend whose decoder can leave levels out: the miniature's).

    codec_levels_per(P) -> {"levels": [1, 2, 4, 8, 16], "per": {lang: [PER at each level]}, "mean": [...]}

Where the acoustic levels add what the recogniser uses, the PER falls as k grows. At k = 16 it is the quality
stage's `per_codec` (the same decoder, recogniser and utterances, recognised per language as there).
"""

from __future__ import annotations

from helpers.artifacts import load_json, save_json
from helpers.experiment.run.backend_factory import backend
from helpers.experiment.run.params import RunParams
from helpers.experiment.run.pool import run_jobs
from helpers.experiment.stages.stage_cache import cached
from helpers.experiment.stages.stages import samples

LEVELS = (1, 2, 4, 8, 16)


def level_job(P: RunParams, levels: int) -> dict[str, float]:
    """PER per language of the evaluation codes decoded with their first `levels` levels."""
    b, rows = backend(P), samples(P, "evaluation")
    if not hasattr(b, "decode_levels"):
        raise ValueError(f"the {P.backend} backend cannot decode a code stream with levels left out (the mini one can)")
    per = {}
    for lang in b.languages:
        group = [s for s in rows if s.lang == lang]
        if group and b.has_phoneme_asr(lang):
            audio = [b.decode_levels(s.codes, levels) for s in group]
            per[lang] = b.phoneme_error_rate(b.reference_phonemes(group), b.recognise_phonemes(audio))
    return per


def codec_levels_per(P: RunParams, levels: tuple[int, ...] = LEVELS) -> dict:
    """The round trip's PER with the first k levels, for each k of `levels`, per language and its mean (cached; the
    levels run as pool jobs)."""
    def build(folder):
        parts = run_jobs(P, level_job, list(levels), "codec levels")
        langs = list(parts[0])
        per = {lang: [part[lang] for part in parts] for lang in langs}
        mean = [sum(part.values()) / len(part) for part in parts]
        save_json(folder / "codec_levels_per.json", {"levels": list(levels), "per": per, "mean": mean})

    return cached(P, "data", build, lambda folder: load_json(folder / "codec_levels_per.json"),
                  name="codec-levels-per")
