"""Notebook 05 (WER parity): the quality stage aggregated over seeds and the paired per-utterance PER test. How far
AR and speculative part across languages, the WER columns without signal and the parity test in words, which
report.md says too: `helpers.report.quality_parity`.

- Per language the mean and std of each error rate over the WER seeds, the table notebook 05 shows, the `languages`
  section it writes to metrics.json, and the across-language figures said under it.
- `paired_rows` / `paired_summary`: speculative minus AR per utterance, a paired t-test per language with its
  confidence interval and power, and the sentence read first.

Input: the dict `quality(P)` (`helpers.experiment.stages.quality`) returns; its `languages` entry is

    {lang: {"per_gt", "per_codec", "wer_codec": float | None,
            "per_ar", "per_spec", "wer_ar", "wer_spec": [float per seed] (empty where not scored),
            "frames_ar", "frames_spec": int, "parity_p": float, "phonemes", "transcripts": [...],
            "per_ar_utterances", "per_spec_utterances": [seed][utterance] PERs}}

Everything here is pure: plain dicts, lists and numbers in, the same out.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from helpers.report.quality_parity import mean_present


SYSTEMS = ("per_ar", "per_spec", "wer_ar", "wer_spec")       # the per-seed error rates averaged here


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and (population) std over seeds: (None, None) from no seed, std None from fewer than two seeds."""
    if not values:
        return None, None
    return float(np.mean(values)), (float(np.std(values)) if len(values) > 1 else None)


def language_section(r: dict) -> dict:
    """One language of the quality stage (`quality(P)["languages"][lang]`, layout above) as metrics.json's
    `languages.<lang>` entry:

    {"per_gt", "per_codec", "wer_codec": as given, for each of per_ar, per_spec, wer_ar, wer_spec:
     <key> (mean over seeds or None), <key>_std (std or None), <key>_per_seed (the list as given),
     "parity_p", "frames_ar", "frames_spec", and "per_ar_utterances" / "per_spec_utterances" where recorded: as
     given}."""
    stats = {k: mean_std(r[k]) for k in SYSTEMS}
    return {"per_gt": r["per_gt"], "per_codec": r["per_codec"], "per_ar": stats["per_ar"][0],
            "per_ar_std": stats["per_ar"][1], "per_spec": stats["per_spec"][0], "per_spec_std": stats["per_spec"][1],
            "per_ar_per_seed": r["per_ar"], "per_spec_per_seed": r["per_spec"], "wer_codec": r["wer_codec"],
            "wer_ar": stats["wer_ar"][0], "wer_ar_std": stats["wer_ar"][1], "wer_spec": stats["wer_spec"][0],
            "wer_spec_std": stats["wer_spec"][1], "wer_ar_per_seed": r["wer_ar"], "wer_spec_per_seed": r["wer_spec"],
            "parity_p": r["parity_p"], "frames_ar": r["frames_ar"], "frames_spec": r["frames_spec"],
            **{k: r[k] for k in ("per_ar_utterances", "per_spec_utterances") if r.get(k)}}


def quality_row(lang: str, r: dict, seeds: int) -> dict:
    """One row of notebook 05's quality table from the stage's entry `r` of `lang` (layout above); seeds: the
    run's WER seeds (P.wer_seeds). Columns: language, seeds, PER truth, PER codec, PER AR, AR std, PER spec,
    spec std, WER codec, WER AR, WER spec, WER seeds (how many seeds WER scored), frames AR / spec ("a / b"),
    parity p."""
    s = language_section(r)
    return {"language": lang, "seeds": seeds, "PER truth": r["per_gt"], "PER codec": r["per_codec"],
            "PER AR": s["per_ar"], "AR std": s["per_ar_std"], "PER spec": s["per_spec"], "spec std": s["per_spec_std"],
            "WER codec": r["wer_codec"], "WER AR": s["wer_ar"], "WER spec": s["wer_spec"],
            "WER seeds": len(r["wer_ar"]),
            "frames AR / spec": f"{r['frames_ar']} / {r['frames_spec']}", "parity p": r["parity_p"]}


def quality_table(languages: dict, langs: Sequence[str], seeds: int) -> tuple[list[dict], dict]:
    """The quality stage's languages (`quality(P)["languages"]`) in the order `langs` (P.languages) ->
    (the table's rows, one `quality_row` per language; the metrics section {lang: `language_section`})."""
    rows = [quality_row(lang, languages[lang], seeds) for lang in langs]
    section = {lang: language_section(languages[lang]) for lang in langs}
    return rows, section


def codec_loss(section: dict, langs: Sequence[str]) -> float:
    """The PER the codec round trip adds, averaged over `langs` (scored ones): mean of per_codec - (per_gt or 0),
    per_gt None where the backend has no original audio. section: {lang: `language_section`-like dict}."""
    return float(np.mean([section[lang]["per_codec"] - (section[lang]["per_gt"] or 0) for lang in langs]))


def phase_cost_rows(seconds: dict, frames: dict) -> list[dict]:
    """What each phase of the quality stage cost, as a table: seconds {"wall", "cpu": {phase: s}} and frames
    {"synthesized": {system: n}, "decoded": n} as `quality(P)` (`helpers.experiment.stages.quality`) returns them -> one
    row per phase the stage timed, {"phase", "frames", "wall s", "CPU s", "CPU ms per frame"}: the synthesis phases (per
    system, its frames synthesized), "control" (frames redrawn, frames["control"]), "decode" and "scoring" (both per
    decoded frame)."""
    phases = [*frames["synthesized"].items(), ("control", frames.get("control", 0)), ("decode", frames["decoded"]),
              ("scoring", frames["decoded"])]
    return [{"phase": phase, "frames": n, "wall s": seconds["wall"][phase], "CPU s": seconds["cpu"][phase],
             "CPU ms per frame": 1e3 * seconds["cpu"][phase] / max(n, 1)}
            for phase, n in phases if phase in seconds["cpu"]]


def phase_costs(seconds: dict, frames: dict) -> dict[str, str]:
    """`phase_cost_rows` in words: {phase: "W s wall, C s CPU, M ms CPU per frame"}."""
    return {r["phase"]: f"{r['wall s']:.0f} s wall, {r['CPU s']:.0f} s CPU, {r['CPU ms per frame']:.0f} ms CPU per frame"
            for r in phase_cost_rows(seconds, frames)}


def recogniser_line(rec: dict, where: str) -> str:
    """The phoneme recogniser in one sentence (rec: its training history: "parameters", "clips", "seconds",
    "cpu_seconds", "threads", "loss" and "val_per" per epoch), its training time with `where` it was measured."""
    cpu = f"{rec['cpu_seconds']:.0f} s CPU, " if rec.get("cpu_seconds") is not None else ""
    return (f"The phoneme recogniser: {rec['parameters']:,} parameters, trained on {rec['clips']:,} clips in "
            f"{rec['seconds']:.0f} s ({cpu}{rec['threads']} thread(s); {where}); CTC loss {rec['loss'][0]:.2f} -> "
            f"{rec['loss'][-1]:.2f}, held-out PER {rec['val_per'][-1]:.1%} after {len(rec['loss'])} epochs.")


def paired_test(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], alpha: float = 0.05,
                power: float = 0.8) -> dict:
    """Paired test of two systems' per-utterance error rates. a, b: [seed][utterance] (the same utterances in the
    same order in every seed of both); each utterance is averaged over seeds, then paired (b - a).
    -> {"n", "mean_a", "mean_b", "diff" (mean of b - a), "ci" (1 - alpha, t), "p" (two-sided paired t; 1.0 where every
        difference is 0), "detectable" (the difference the test finds with probability `power` at `alpha`)}."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 2 or a.shape[1] != b.shape[1] or a.shape[1] < 2:
        raise ValueError(f"need [seed][utterance] scores of at least 2 utterances, the same for both; got {a.shape}, "
                         f"{b.shape}")
    ua, ub = a.mean(axis=0), b.mean(axis=0)
    d, n = ub - ua, a.shape[1]
    sd = float(d.std(ddof=1))
    t = stats.t.ppf(1 - alpha / 2, n - 1)
    half = t * sd / math.sqrt(n)
    p = float(stats.ttest_rel(ub, ua).pvalue) if sd > 0 else 1.0
    detectable = (t + stats.t.ppf(power, n - 1)) * sd / math.sqrt(n)
    return {"n": n, "mean_a": float(ua.mean()), "mean_b": float(ub.mean()), "diff": float(d.mean()),
            "ci": [float(d.mean() - half), float(d.mean() + half)], "p": p, "detectable": float(detectable),
            "alpha": alpha, "power": power}


def intelligibility(per_truth: float | None, per_codec: float | None, per_ar: float) -> str:
    """How intelligible the synthesis is, from its PER against the original audio's and the codec round trip's."""
    level = ("mostly unintelligible" if per_ar > 0.5 else "partly intelligible" if per_ar > 0.25 else "intelligible")
    refs = ", ".join(f"{name} {v:.1%}" for name, v in (("original audio", per_truth), ("codec round trip", per_codec))
                     if v is not None)
    return f"the synthesis is {level} (PER {per_ar:.1%}" + (f"; {refs}" if refs else "") + ")"


ALPHA = 0.05


def paired_rows(section: dict, scored: Sequence[str]) -> list[dict]:
    """Per scored language with per-utterance PERs: speculative - AR per utterance, paired t-test at ALPHA.
    A language whose quality stage was cached before per-utterance scores were kept has no row."""
    rows = []
    for lang in scored:
        s = section[lang]
        if not s.get("per_ar_utterances"):
            continue
        t = paired_test(s["per_ar_utterances"], s["per_spec_utterances"], alpha=ALPHA)
        rows.append({"language": lang, "utterances": t["n"], "PER truth, pooled": s["per_gt"],
                     "PER codec, pooled": s["per_codec"], "PER AR, utterance mean": t["mean_a"],
                     "PER spec, utterance mean": t["mean_b"], "spec - AR": t["diff"],
                     "95% CI": f"[{t['ci'][0]:+.3f}, {t['ci'][1]:+.3f}]", "paired p": t["p"],
                     "detectable (80% power)": t["detectable"]})
    return rows


def paired_summary(rows: list[dict]) -> str:
    """What `paired_rows` says, averaged over its languages: how intelligible the synthesis is, how many languages
    differ at p < ALPHA against how many would by chance, and the smallest difference the tests find 80% of the time."""
    if not rows:
        raise ValueError("paired_summary needs at least one row of paired_rows")
    mean_ar = mean_present([r["PER AR, utterance mean"] for r in rows])
    worst = max(rows, key=lambda r: r["detectable (80% power)"])
    best = min(r["detectable (80% power)"] for r in rows)
    sizes = "-".join(sorted({str(r["utterances"]) for r in rows}, key=int))
    return (f"Read this first: averaged over {len(rows)} languages (AR: the utterance means; original audio and codec "
            "round trip: pooled), "
            + intelligibility(mean_present([r["PER truth, pooled"] for r in rows]),
                              mean_present([r["PER codec, pooled"] for r in rows]), mean_ar)
            + (", so a PER difference here compares two kinds of mostly wrong speech, not speech quality. "
               if mean_ar > 0.5 else ". ")
            + f"{sum(r['paired p'] < ALPHA for r in rows)} of {len(rows)} languages show a speculative - AR difference "
            f"at p < {ALPHA} (with {len(rows)} tests, about {ALPHA * len(rows):.1f} would by chance). Power: with "
            f"{sizes} utterances per language the test finds, 80% of the time, a difference of {best:.1%} to "
            f"{worst['detectable (80% power)']:.1%} PER ({worst['language']}); smaller differences go unseen.")


def frame_count_sentence(section: dict, eval_frames: dict[str, int], seeds: int) -> str:
    """Why the frames AR / spec column is or is not `seeds` x each language's evaluation frames (eval_frames:
    language -> frames of the evaluation runs, seed 0): a run's length is the talker's, which samples when speech
    ends; runs of other seeds share no random stream with the evaluation run, so a language whose column differs had a
    run that ended earlier (fewer frames) or later (more) than the evaluation run of its utterance."""
    off = {lang: (section[lang]["frames_ar"], section[lang]["frames_spec"]) for lang in eval_frames
           if (section[lang]["frames_ar"], section[lang]["frames_spec"]) != (seeds * eval_frames[lang],) * 2}
    text = ("A run's length is the talker's: it samples when the speech ends (on the miniature nearly always where the "
            "text's phonemes end), and a seed's runs share no random stream with the evaluation run's, so a run "
            "may stop elsewhere. ")
    if not off:
        return text + f"Here every run of every language has its utterance's evaluation length ({seeds} x the frames)."

    def how(total, expected):
        return ("as expected" if total == expected else
                f"{expected - total} fewer: a run stopped early" if total < expected else
                f"{total - expected} more: a run went on longer")
    return text + "Where that happened here: " + "; ".join(
        f"{lang}, {seeds} x {eval_frames[lang]} = {seeds * eval_frames[lang]} expected, AR {a} "
        f"({how(a, seeds * eval_frames[lang])}), speculative {s} ({how(s, seeds * eval_frames[lang])})"
        for lang, (a, s) in off.items()) + ". The other languages' runs all have their evaluation lengths."


def paired_heading(seeds: int) -> str:
    """What the paired table's columns are, before it (seeds: the run's WER seeds)."""
    return ("**PER side by side, paired per utterance**: here PER AR / spec are the *mean of the per-utterance PERs* "
            f"(each utterance's PER averaged over the {seeds} seeds, every utterance weighing the same), so they can "
            "differ from the pooled PER above; truth and codec stay pooled. Speculative minus AR per utterance, "
            f"paired t-test, alpha {ALPHA}.")


def codec_loss_sentence(section: dict, langs: Sequence[str]) -> str:
    """The codec's share of the error (`codec_loss`) in one sentence."""
    return (f"The ground-truth codes decoded lose {codec_loss(section, langs):+.1%} PER on average against the "
            "original audio (the codec's share of the error).")
