"""AR and speculative speech side by side across languages, where notebook 05 and report.md say the same: the
languages PER scored, how far the two syntheses part against the seeds' spread (`parity_gap`), the WER columns an
ASR that recognises almost nothing leaves without signal (`silent_wer_sentence`), the independent-stream parity test
in words (`parity_lines`). Input: metrics' `languages` section (`helpers.report.nb05_quality.language_section` per
language) and `parity`; pure: plain dicts and numbers in, the same out.
"""

from __future__ import annotations

from typing import Sequence


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


def mean_present(values: list, empty=None) -> float | None:
    """The mean of the values that are not None; `empty` where there is none."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else empty


NO_SIGNAL_WER = 0.8      # an ASR whose WER on the codec round trip is above this recognises almost nothing


def asr_has_signal(wer_codec: float | None) -> bool | None:
    """Whether the ASR's WER can say anything: None where there is no WER, False where even the ground-truth codes
    decoded score above NO_SIGNAL_WER."""
    return None if wer_codec is None else wer_codec <= NO_SIGNAL_WER


def silent_wer_sentence(section: dict, langs: Sequence[str]) -> str | None:
    """The languages whose ASR scores even the codec round trip above NO_SIGNAL_WER, said; None where there are none."""
    silent = [lang for lang in langs if asr_has_signal(section[lang].get("wer_codec")) is False]
    if not silent:
        return None
    return (f"**The WER columns carry no signal** for {', '.join(silent)}: the ASR scores even the codec round trip "
            "of the ground truth at WER " + ", ".join(f"{section[lang]['wer_codec']:.0%}" for lang in silent)
            + f" (above {NO_SIGNAL_WER:.0%}: it recognises almost nothing), so its AR and speculative WER say nothing "
            "about either.")


def parity_lines(par: dict | None) -> list[str]:
    """The independent-stream parity test and its control in words (metrics' `parity` section)."""
    if not par:
        return []
    control = par.get("control", {})
    return ["", f"Parity in distribution (AR {par['samples'][0]:,} vs speculative {par['samples'][1]:,} frames from "
            f"independent streams): adjusted p {par['p_min_adjusted']:.3g}, "
            f"{'the distributions DIFFER' if par['rejected'] else 'no difference'} at alpha = {par['alpha']:g}. "
            f"Control, speculative vs the AR frames with c1..c15 redrawn at temperature "
            f"{par.get('control_temperature')}: adjusted p "
            f"{control.get('p_min_adjusted', float('nan')):.3g}, "
            f"{'rejected, as it must be' if control.get('rejected') else 'NOT rejected: the test lacks power'}."]
