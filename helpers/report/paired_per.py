"""Notebook 05's paired comparison of AR and speculative PER, per utterance, and what it says.

    rows = paired_rows(section, scored)          # one row per language: utterance-mean PERs, paired t-test, power
    paired_summary(rows)                         # the sentence read first: intelligibility, how many p < 0.05, power
    silent_wer_sentence(section, langs)          # where the ASR recognises nothing even on the codec round trip

`section` is the `languages` section of metrics.json (`helpers.report.quality_table.quality_table`): per language
"per_gt", "per_codec", "wer_codec" (float or None) and "per_ar_utterances", "per_spec_utterances"
([seed][utterance] PERs). Pure: plain dicts and numbers in, rows and text out.
"""

from __future__ import annotations

from typing import Sequence

from helpers.report.interpret import NO_SIGNAL_WER, asr_has_signal, intelligibility, paired_test

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


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def paired_summary(rows: list[dict]) -> str:
    """What `paired_rows` says, averaged over its languages: how intelligible the synthesis is, how many languages
    differ at p < ALPHA against how many would by chance, and the smallest difference the tests find 80% of the time."""
    if not rows:
        raise ValueError("paired_summary needs at least one row of paired_rows")
    mean_ar = _mean([r["PER AR, utterance mean"] for r in rows])
    worst = max(rows, key=lambda r: r["detectable (80% power)"])
    best = min(r["detectable (80% power)"] for r in rows)
    sizes = "-".join(sorted({str(r["utterances"]) for r in rows}, key=int))
    return (f"Read this first: averaged over {len(rows)} languages (AR: the utterance means; original audio and codec "
            "round trip: pooled), "
            + intelligibility(_mean([r["PER truth, pooled"] for r in rows]),
                              _mean([r["PER codec, pooled"] for r in rows]), mean_ar)
            + (", so a PER difference here compares two kinds of mostly wrong speech, not speech quality. "
               if mean_ar > 0.5 else ". ")
            + f"{sum(r['paired p'] < ALPHA for r in rows)} of {len(rows)} languages show a speculative - AR difference "
            f"at p < {ALPHA} (with {len(rows)} tests, about {ALPHA * len(rows):.1f} would by chance). Power: with "
            f"{sizes} utterances per language the test finds, 80% of the time, a difference of {best:.1%} to "
            f"{worst['detectable (80% power)']:.1%} PER ({worst['language']}); smaller differences go unseen.")


def silent_wer_sentence(section: dict, langs: Sequence[str]) -> str | None:
    """The languages whose ASR scores even the codec round trip above NO_SIGNAL_WER, said; None where there are none."""
    silent = [lang for lang in langs if asr_has_signal(section[lang].get("wer_codec")) is False]
    if not silent:
        return None
    return (f"**The WER columns carry no signal** for {', '.join(silent)}: the ASR scores even the codec round trip "
            "of the ground truth at WER " + ", ".join(f"{section[lang]['wer_codec']:.0%}" for lang in silent)
            + f" (above {NO_SIGNAL_WER:.0%}: it recognises almost nothing), so its AR and speculative WER say nothing "
            "about either.")


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
