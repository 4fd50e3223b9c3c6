"""The quality stage's result aggregated over seeds (notebook 05): per language the mean and std of each error rate
over the WER seeds, the table notebook 05 shows, the `languages` section it writes to metrics.json, and the
across-language figures said under it (largest AR - speculative gap, largest spread, the codec's share).

Input: the dict `quality(P)` (`helpers.experiment.quality`) returns; its `languages` entry is

    {lang: {"per_gt", "per_codec", "wer_codec": float | None,
            "per_ar", "per_spec", "wer_ar", "wer_spec": [float per seed] (empty where not scored),
            "frames_ar", "frames_spec": int, "parity_p": float, "phonemes", "transcripts": [...]}}

Everything here is pure: plain dicts, lists and numbers in, the same out.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

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


def scored_languages(section: dict, langs: Sequence[str] | None = None) -> list[str]:
    """The languages PER scored, in order: section {lang: `language_section`-like dict} (metrics' `languages`; an
    entry without "per_ar", or with None there, is not scored); langs: those to look at (default: the section's)."""
    return [lang for lang in (section if langs is None else langs) if section[lang].get("per_ar") is not None]


def parity_gap(section: dict, langs: Sequence[str] | None = None) -> dict | None:
    """Across the languages PER scored (`scored_languages(section, langs)`): how far AR and speculative synthesis
    part, against the seeds' own spread.

    -> None where no language is scored, else {"scored": [lang], "gap": max |per_ar - per_spec| of the means,
       "spread": the largest per_ar_std / per_spec_std (None where every std is None: one seed each)}."""
    scored = scored_languages(section, langs)
    if not scored:
        return None
    stds = [s for lang in scored for s in (section[lang].get("per_ar_std"), section[lang].get("per_spec_std"))
            if s is not None]
    return {"scored": scored, "gap": max(abs(section[lang]["per_ar"] - section[lang]["per_spec"]) for lang in scored),
            "spread": max(stds) if stds else None}


def codec_loss(section: dict, langs: Sequence[str]) -> float:
    """The PER the codec round trip adds, averaged over `langs` (scored ones): mean of per_codec - (per_gt or 0),
    per_gt None where the backend has no original audio. section: {lang: `language_section`-like dict}."""
    return float(np.mean([section[lang]["per_codec"] - (section[lang]["per_gt"] or 0) for lang in langs]))


def phase_cost_rows(seconds: dict, frames: dict) -> list[dict]:
    """What each phase of the quality stage cost, as a table: seconds {"wall", "cpu": {phase: s}} and frames
    {"synthesized": {system: n}, "decoded": n} as `quality(P)` (`helpers.experiment.quality`) returns them -> one row
    per phase the stage timed, {"phase", "frames", "wall s", "CPU s", "CPU ms per frame"}: the synthesis phases (per
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
