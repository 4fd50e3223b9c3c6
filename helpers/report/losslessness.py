"""Losslessness in words: AR against speculative codes from the same seeds, frame for frame, and the per-position
parity test (notebook 04, report.md)."""

from __future__ import annotations


def lossless_lines(lo: dict, talker_dtype: str | None = None) -> list[str]:
    """AR vs speculative codes in words: frames identical and, where not all are, where they first differ and the
    per-position parity test. lo: metrics' `lossless` section (`FrameComparison.to_dict()`, "exact",
    "inner_loop_dtype", "parity": `CodeParity.to_dict()`)."""
    identical = lo["frames_identical"] == lo["frames_compared"]
    mode = {True: "exact mode: every frame must be identical", False: "deployment mode: identical on most frames, "
            "equal in distribution", None: "mode not recorded"}[lo.get("exact")]
    lines = [f"Inner loop in {lo.get('inner_loop_dtype', '?')} beside a {talker_dtype or '?'} talker ({mode}). "
             f"Speculative vs AR codes from the same seeds: **{lo['frames_identical']:,} of {lo['frames_compared']:,} "
             f"frames identical** ({lo.get('identical_fraction', lo['frames_identical'] / max(lo['frames_compared'], 1)):.2%}"
             f"{', full equality' if identical else ', NOT all identical'})."]
    if not identical and "first_difference" in lo:
        first = {i: c for i, c in enumerate(lo["first_difference"]) if c}
        onset = {i: c for i, c in enumerate(lo["onset"]) if c}
        lines += ["", f"First code position where a differing frame differs (position: frames): {first}; in each "
                  f"utterance's first differing frame (where the trajectories part): {onset}."]
    par = lo.get("parity")
    if par and lo.get("exact") and identical:        # identical streams: p = 1 by construction, a test that cannot fail
        lines += ["", "No per-position chi-square here: on identical code streams it gives p = 1 by construction and "
                  "cannot fail. In exact mode the test is the equality above, frame for frame."]
    elif par:
        worst = min(range(len(par["p_values"])), key=par["p_values"].__getitem__)
        verdict = "the code distributions DIFFER" if par["rejected"] else "no difference in distribution"
        lines += ["", f"Parity test per code position (two-sample chi-square on the code histograms, AR {par['samples'][0]:,} "
                  f"vs speculative {par['samples'][1]:,} frames): smallest p {par['p_values'][worst]:.3g} at position "
                  f"{worst}, Bonferroni-adjusted {par['p_min_adjusted']:.3g}: {verdict} at alpha = {par['alpha']:g}.",
                  "", "p per position: " + ", ".join(f"{p:.2g}" for p in par["p_values"]) + "."]
    return lines
