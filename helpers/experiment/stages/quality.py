"""The quality stage: AR and speculative synthesis from independent random streams, scored and parity-tested.

    quality(P) -> {"languages": per-language PER / WER and parity, "parity", "control", "seconds", "frames", ...}

Same-seed identity of AR and speculative codes is the evaluation stage's (`helpers.experiment.stages.stages`); here the
two systems draw from independent streams (`quality_seeds`) over P.wer_seeds seeds, so their quality and their
code distributions can be compared. A control shows the parity test can reject: the AR runs' frames with c1..c15
redrawn at another temperature (`control_codes`). The stage's artifacts keep their name, `wer-<key>/wer.json`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from helpers.artifacts import load_json, save_json
from helpers.backends.base import Backend, Sample
from helpers.experiment.run.backend_factory import backend, sampler
from helpers.experiment.run.params import RunParams
from helpers.experiment.run.pool import run_jobs, worker_count
from helpers.experiment.stages.stage_cache import cached
from helpers.experiment.stages.stages import WER_SEED_STRIDE, decoder, main_drafter, samples, syntheses
from helpers.adapter.synthesis import Synthesis
from helpers.method.parity import run_parity
from helpers.method.training import sampled_targets

STREAMS = {"ar": 0, "spec": 1, "control": 2}   # independent random streams of the quality stage
SYSTEMS = ("ar", "spec")                       # synthesised; the control redraws AR's frames (`control_codes`)
STREAM_STRIDE = 1_000_000          # seed of stream k, seed s, sample i: P.seed + k * STREAM_STRIDE + s * WER_SEED_STRIDE + i
# The parity test's control: an inner loop sampling at this temperature must be told apart, from every seed (as many
# frames as the test compares). With a semantic c0 (the miniature's, as on the real tokenizer) c0 is nearly fixed by
# the text and the deep codes' marginals are near uniform, so a test of marginals sees the temperature only weakly:
# from the first seed alone the control was rejected in one build (adjusted p 3e-12) and not in another (0.04).
CONTROL_TEMPERATURE = 1.2


def quality_seeds(P: RunParams, stream: str, seed_index: int, indices: list[int]) -> list[int]:
    """Synthesis seeds of one stream ("ar", "spec", "control") and WER seed for the evaluation samples `indices`
    (AR's first seed is the evaluation stage's: P.seed + index)."""
    if max(indices, default=0) >= WER_SEED_STRIDE or P.wer_seeds * WER_SEED_STRIDE > STREAM_STRIDE:
        raise ValueError(f"fewer than {WER_SEED_STRIDE} evaluation samples and at most {STREAM_STRIDE // WER_SEED_STRIDE}"
                         f" WER seeds keep the streams apart; got {max(indices) + 1} and {P.wer_seeds}")
    return [P.seed + STREAMS[stream] * STREAM_STRIDE + seed_index * WER_SEED_STRIDE + i for i in indices]


def control_codes(P: RunParams, runs: list[Synthesis], seeds: list[int]) -> list[torch.Tensor]:
    """The parity test's control: each AR run's frames [T, 16] with c1..c15 redrawn by the code predictor at
    CONTROL_TEMPERATURE from the run's own (g, c0), one generator per run seeded from the control stream: what an
    inner loop sampling from the wrong distribution would give, on contexts distributed as AR's. One batched draw
    per run (15 calls), not a synthesis."""
    hot = replace(sampler(P), temperature=CONTROL_TEMPERATURE)
    predictor = backend(P).predictor
    return [sampled_targets(predictor, r.g, r.codes, hot, torch.Generator().manual_seed(seed))
            for r, seed in zip(runs, seeds, strict=True)]


def transcripts(b: Backend, samples: list[Sample], audio: list) -> list[str]:
    """ASR transcripts of each sample's audio, batched per language (the backend must have an ASR for each)."""
    hyps: list[str] = [""] * len(samples)
    for lang in dict.fromkeys(s.lang for s in samples):
        idx = [i for i, s in enumerate(samples) if s.lang == lang]
        for i, h in zip(idx, b.transcribe([audio[i] for i in idx], lang)):
            hyps[i] = h
    return hyps


class _Stopwatch:
    """Wall and CPU (process) seconds per phase: `with watch("ar"): ...`; CPU time does not grow with others' load."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._phase = None

    def __call__(self, phase: str) -> "_Stopwatch":
        self._phase = phase
        return self

    def __enter__(self):
        self._start = (time.perf_counter(), time.process_time())

    def __exit__(self, *exc):
        for totals, now, then in zip((self.wall, self.cpu), (time.perf_counter(), time.process_time()), self._start):
            totals[self._phase] = totals.get(self._phase, 0.0) + now - then

    def add(self, seconds: dict) -> None:
        """Add another stopwatch's `to_dict()` (a worker's) phase by phase."""
        for totals, part in ((self.wall, seconds["wall"]), (self.cpu, seconds["cpu"])):
            for phase, value in part.items():
                totals[phase] = totals.get(phase, 0.0) + value

    def to_dict(self) -> dict:
        return {"wall": {k: round(v, 1) for k, v in self.wall.items()}, "cpu": {k: round(v, 1) for k, v in self.cpu.items()}}


def _scores(b: Backend, group: list[Sample], audio: list, row: dict, name: str, first: bool) -> None:
    """Append PER (where the backend has a phoneme recogniser) and WER (where it has an ASR) of one system's audio
    of a language group to row[f"per_{name}"] and row[f"wer_{name}"]; the first seed's transcripts are kept.
    Where PER scores the language, WER is its extra column and is scored on the first seed only (`wer_first_only`)."""
    lang = group[0].lang
    if b.has_phoneme_asr(lang):
        refs, hyps = b.reference_phonemes(group), b.recognise_phonemes(audio)
        row[f"per_{name}"].append(b.phoneme_error_rate(refs, hyps))
        row[f"per_{name}_utterances"].append([b.phoneme_error_rate([r], [h]) for r, h in zip(refs, hyps)])  # paired tests
        if first:
            row["phonemes"].append({"system": name, "ref": " ".join(refs[0]), "hyp": " ".join(hyps[0])})
    if b.has_asr(lang) and (first or not wer_first_only(b, lang)):
        refs, hyps = [s.text for s in group], transcripts(b, group, audio)
        row[f"wer_{name}"].append(b.error_rate(refs, hyps, lang))
        if first:
            row["transcripts"] += [{"system": name, "ref": r, "hyp": h} for r, h in zip(refs, hyps)]


def wer_first_only(b: Backend, lang: str) -> bool:
    """True where a phoneme recogniser scores `lang`: PER is then the quality metric over every seed and WER (an
    English ASR's, seconds per clip: most of the stage's scoring time) an extra column from the first seed."""
    return b.has_phoneme_asr(lang)


def _reference_scores(b: Backend, group: list[Sample], watch: _Stopwatch) -> dict:
    """PER of the original audio and of the ground-truth codes decoded, WER of the latter (None where not scored)."""
    lang, out = group[0].lang, {"per_gt": None, "per_codec": None, "wer_codec": None}
    if not (b.has_phoneme_asr(lang) or b.has_asr(lang)):
        return out
    with watch("decode"):
        codec = [b.decode(s.codes) for s in group]
    with watch("scoring"):
        if b.has_phoneme_asr(lang):
            refs, original = b.reference_phonemes(group), b.reference_audio(group)
            if original is not None:
                out["per_gt"] = b.phoneme_error_rate(refs, b.recognise_phonemes(original))
            out["per_codec"] = b.phoneme_error_rate(refs, b.recognise_phonemes(codec))
        if b.has_asr(lang):
            out["wer_codec"] = b.error_rate([s.text for s in group], transcripts(b, group, codec), lang)
    return out


@dataclass(frozen=True)
class QualityJob:
    """One language's reference scores (system "reference"), or one system's runs ("ar", "spec") of one seed over
    the language's evaluation samples (AR's with the control's codes, `control_codes`)."""
    lang: str
    system: str
    seed_index: int = 0


def quality_job(P: RunParams, job: QualityJob) -> dict:
    """A `QualityJob` synthesised (AR's first seed: the evaluation stage's runs), decoded and scored:
    {"row": its part of the language's row, "codes": [codes [T, 16]], "control": [codes [T, 16]] (AR's jobs),
     "seconds": phase -> wall / CPU, "synthesized", "decoded": frames}."""
    b, rows = backend(P), samples(P, "evaluation")
    indices = [i for i, s in enumerate(rows) if s.lang == job.lang]
    group = [rows[i] for i in indices]
    watch, out = _Stopwatch(), {"row": {}, "codes": [], "control": [], "synthesized": 0, "decoded": 0}
    if job.system == "reference":
        out["row"] = _reference_scores(b, group, watch)
        if out["row"]["per_codec"] is not None or out["row"]["wer_codec"] is not None:
            out["decoded"] = sum(len(s.codes) for s in group)
        out["seconds"] = watch.to_dict()
        return out
    with watch(job.system):
        if (job.system, job.seed_index) == ("ar", 0):            # the evaluation stage's AR runs: the same seeds, kept
            runs = [syntheses(P)[0][i] for i in indices]
        else:
            dec = decoder(P, main_drafter(P), P.tree_size) if job.system == "spec" else "ar"
            runs = [b.synthesize(s, dec, seed=seed)
                    for s, seed in zip(group, quality_seeds(P, job.system, job.seed_index, indices))]
            out["synthesized"] = sum(len(r.codes) for r in runs)
    out["codes"] = [r.codes for r in runs]
    if job.system == "ar":
        with watch("control"):
            out["control"] = control_codes(P, runs, quality_seeds(P, "control", job.seed_index, indices))
    if b.has_phoneme_asr(job.lang) or b.has_asr(job.lang):
        with watch("decode"):
            audio = [b.decode(r.codes) for r in runs]
        out["decoded"] = sum(len(r.codes) for r in runs)
        out["row"] = {f"per_{job.system}": [], f"per_{job.system}_utterances": [], f"wer_{job.system}": [],
                      "phonemes": [], "transcripts": []}
        with watch("scoring"):
            _scores(b, group, audio, out["row"], job.system, job.seed_index == 0)
    out["seconds"] = watch.to_dict()
    return out


def quality(P: RunParams) -> dict:
    """Quality and parity over P.wer_seeds seeds, AR and speculative (main drafter, N = tree_size) synthesis from
    independent random streams (`quality_seeds`; same-seed identity is the evaluation stage's):

    {"languages": {lang: {"per_gt", "per_codec": PER of the original audio and of the ground-truth codes decoded,
                          "per_ar", "per_spec": [per seed], "per_ar_utterances", "per_spec_utterances": [per seed]
                          [per utterance] (paired tests), "wer_codec", "wer_ar", "wer_spec": the same in WER where
                          there is an ASR (None / [] elsewhere; the first seed only where PER scores the
                          language, `wer_first_only`), "frames_ar", "frames_spec", "parity_p": this
                          language's adjusted p, "phonemes", "transcripts": the first seed's}},
     "parity": `run_parity(...).to_dict()`, AR vs speculative runs of every language and seed (must not reject),
     "control": the same test, speculative vs the AR runs redrawn at CONTROL_TEMPERATURE (`control_codes`, every
     seed; must reject), "control_temperature",
     "seconds": {"wall", "cpu"}: {"ar", "spec", "control", "decode", "scoring"}, summed over the jobs
     (`quality_job`, on "workers" processes: "elapsed" is the stage's own wall time), and "recogniser" (its training
     where it was not cached; scoring: recognition and ASR), "frames": {"ar", "spec", "control": compared,
     "decoded", "synthesized": {"ar", "spec"}}: what those seconds bought, "recogniser": its training history or None}."""
    b = backend(P)
    rows = samples(P, "evaluation")

    def build(folder):
        watch, start = _Stopwatch(), time.perf_counter()
        if any(b.has_phoneme_asr(lang) for lang in b.languages):
            with watch("recogniser"):                 # trained (or loaded) here, before the workers load it
                b.phoneme_recogniser_history()
        syntheses(P), main_drafter(P)                 # built here: the workers only load them
        langs = [lang for lang in b.languages if any(s.lang == lang for s in rows)]
        jobs = [QualityJob(lang, "reference") for lang in langs] + [
            QualityJob(lang, name, s_idx) for lang in langs for s_idx in range(P.wer_seeds) for name in SYSTEMS]
        done = dict(zip(jobs, run_jobs(P, quality_job, jobs, "quality runs")))
        codes = {k: {} for k in STREAMS}                           # stream -> lang -> [codes [T, 16]]
        result, decoded, synthesized = {}, 0, dict.fromkeys(SYSTEMS, 0)
        for job, part in done.items():
            watch.add(part["seconds"])
            decoded += part["decoded"]
            if job.system != "reference":
                synthesized[job.system] += part["synthesized"]
                codes[job.system].setdefault(job.lang, []).extend(part["codes"])
                codes["control"].setdefault(job.lang, []).extend(part["control"])
        for lang in langs:
            row = {f"{m}_{n}": [] for m in ("per", "wer") for n in ("ar", "spec")}
            row.update({f"per_{n}_utterances": [] for n in ("ar", "spec")})
            row.update(phonemes=[], transcripts=[], **done[QualityJob(lang, "reference")]["row"])
            for job in (j for j in jobs if j.lang == lang and j.system != "reference"):
                for key, values in done[job]["row"].items():
                    row[key] += values
            row.update(frames_ar=sum(map(len, codes["ar"][lang])), frames_spec=sum(map(len, codes["spec"][lang])),
                       parity_p=run_parity(codes["ar"][lang], codes["spec"][lang]).p_min_adjusted)
            result[lang] = row
        pooled = {k: [c for by_lang in v.values() for c in by_lang] for k, v in codes.items()}
        frames = {k: sum(map(len, v)) for k, v in pooled.items()}
        save_json(folder / "wer.json", {"languages": result,
                                        "seconds": {**watch.to_dict(), "elapsed": round(time.perf_counter() - start, 1),
                                                    "workers": worker_count(P, len(jobs))},
                                        "frames": {**frames, "decoded": decoded, "synthesized": synthesized},
                                        "parity": run_parity(pooled["ar"], pooled["spec"]).to_dict(),
                                        "control": run_parity(pooled["spec"], pooled["control"]).to_dict(),
                                        "control_temperature": CONTROL_TEMPERATURE,
                                        "recogniser": b.phoneme_recogniser_history()})

    return cached(P, "wer", build, lambda folder: load_json(folder / "wer.json"))
