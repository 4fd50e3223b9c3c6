"""Notebook 04 (speculative decoding): how Table 2 counted its calls, its gaps to what the calibration expected,
each drafter's lead per language, the split of a gain between the tree and the drafter. Pure: numbers in, rows and
text out. Table 2's rows and the main drafter: `helpers.report.drafter_ablation`; losslessness in words:
`helpers.report.losslessness`.
"""

from __future__ import annotations


def replay_line(decoded: dict[str, dict[int, int]], frames: int, exact: bool) -> str:
    """How Table 2 and the tree sweep counted their calls (`stages.replayed`): decoded: frames decoded again per
    drafter and N, frames: the evaluation frames."""
    counts = sorted({v for by_n in decoded.values() for v in by_n.values()})
    configs = sum(len(by_n) for by_n in decoded.values())
    if not exact:
        return (f"Table 2 and the tree sweep decode all {frames:,} recorded frames again for each of the {configs} "
                f"configurations (drafter, N) with the run's uniforms; a frame whose codes differ from the recorded "
                f"one is counted, and its calls count.")
    return (f"Table 2 and the tree sweep count the calls of {configs} configurations (drafter, N) on all {frames:,} "
            f"frames by walking the decoder's own plans over the recorded codes: in exact mode every code the decoder "
            f"samples on its accepted path is the recorded one, so a round accepts the longest path of its tree whose "
            f"drafts are the recorded codes. To check the walk, every configuration was also decoded in full on "
            f"{' / '.join(f'{c:,}' for c in counts)} frames (the first utterance of each language): the same calls, "
            f"frame for frame, and the same codes.")


def expected_gaps(measured: dict[str, float], expected: dict[str, float]) -> dict[str, float]:
    """measured - expected tokens/step per name present in both (a negative gap: the tree delivered less than the
    calibration table promised)."""
    missing = sorted(set(measured) ^ set(expected))
    if missing:
        raise ValueError(f"measured and expected name different drafters: {missing} in only one of them")
    return {k: measured[k] - expected[k] for k in measured}


def gap_sentence(gaps: dict[str, float], per_language: dict[str, float], main: str, n: int) -> str:
    """Table 2 in words: each drafter's gap from expected to measured at N = n, and the main drafter's per language
    (`per_language`: language -> measured - expected)."""
    worst = min(gaps, key=gaps.get)
    langs = ", ".join(f"{lang} {g:+.3f}" for lang, g in per_language.items())
    spread = max(per_language.values()) - min(per_language.values()) if per_language else float("nan")
    return (f"Measured minus expected tokens/step at N = {n}: " + ", ".join(f"{k} {g:+.3f}" for k, g in gaps.items())
            + (f". The largest shortfall is {worst}'s ({gaps[worst]:+.3f}): the calibration table, measured on other "
               "utterances, is an estimate." if gaps[worst] < 0 else ". Every drafter met or beat its expectation.")
            + f" The main drafter ({main}) per language: {langs} (a spread of {spread:.3f}).")


def language_lead_sentence(by_language: dict[str, dict[str, float]], train_languages: list[str], n: int) -> str:
    """Each drafter's measured lead over the reused heads per language at N = n (`by_language`: drafter -> language ->
    tokens/step, with "reused"), and where it is largest, against the languages the drafters were trained on."""
    base = by_language["reused"]
    parts = []
    for kind, langs in by_language.items():
        if kind == "reused":
            continue
        lead = {lang: v - base[lang] for lang, v in langs.items()}
        best, worst = max(lead, key=lead.get), min(lead, key=lead.get)
        trained = "a training language" if best in train_languages else "not a training language"
        parts.append(f"{kind} " + ", ".join(f"{lang} {g:+.3f}" for lang, g in lead.items())
                     + f" (largest on {best}, {trained}; smallest on {worst})")
    return (f"Measured lead over the reused heads per language at N = {n}: " + "; ".join(parts)
            + f". The drafters are trained on {', '.join(train_languages)} frames only.")


def tree_drafter_split(chain: float, tree_same_heads: float, tree_main: float) -> dict[str, float]:
    """A gain over a chain of the reused heads split in two: the tree's (the same heads in the calibrated tree) and
    the drafter's (the main drafter in that same tree)."""
    return {"chain": chain, "tree": tree_same_heads - chain, "drafter": tree_main - tree_same_heads,
            "total": tree_main - chain}
