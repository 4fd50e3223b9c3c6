"""The projected speedup at the 0.6B shape, told one way everywhere (06, report.md, the README): the paper's own
tokens/step at a tree size N it gives, over this CPU's measured call, against the fastest EXACT AR call of the same
grid (`make bench`'s `cpu_0.6b.json`, one machine, one run).

- Provenance: the paper prints Figure 4's ceiling at N = 16 and 64; at N = 32 the value (2.47) is Table 2's
  tokens/step taken as the ceiling, which `paper_numbers.yaml` marks inferred (`ceiling_inferred`). A number that
  is not the paper's as printed says so ("inferred", "derived"), never plain "paper".
- Exactness: no kernel lets a row depend on the call's other rows (w8a8 quantises each row on its own int8 grid,
  `helpers.method.kernels`), so the baseline is the fastest AR call of any deployment; whether whole speculative
  frames equal their AR frames is measured where frames are timed (`cpu_figure4.exact_frames`), never assumed.

Pure: dicts in, dicts and text out.
"""

from __future__ import annotations

from helpers.report.paper import PAPER

PAPER_N = 32                    # the tree size of the paper's headline speedup (2.13x, M3 Pro)


def ceiling_provenance(n: int) -> str | None:
    """"paper" where Figure 4 prints the ceiling at N, "inferred" where the value is read off another table, None
    where the paper gives no value at N."""
    ceiling = {int(k) for k in PAPER["figure4_latency"]["acceptance_ceiling"]}
    if int(n) not in ceiling:
        return None
    return "inferred" if int(n) in set(PAPER["figure4_latency"].get("ceiling_inferred", [])) else "paper"


def ceiling_text(n: int) -> str:
    """The paper's ceiling at N as a table cell, labelled where it is inferred: "2.25", "2.47 (inferred)", "-"."""
    source = ceiling_provenance(n)
    if source is None:
        return "-"
    value = float(PAPER["figure4_latency"]["acceptance_ceiling"][int(n)])
    return f"{value:.2f}" + (" (inferred)" if source == "inferred" else "")


def fastest_exact_ar(grid: dict) -> tuple[str, float]:
    """(name, ms) of the fastest AR call of the grid (any deployment: no kernel lets a row depend on the call's other rows)."""
    exact = {k: v["ar_ms"] for k, v in grid.items() if isinstance(v, dict) and "ar_ms" in v}
    if not exact:
        raise ValueError(f"no deployment in the grid: {sorted(grid)}")
    name = min(exact, key=exact.get)
    return name, exact[name]


def speedups(tokens_per_step: float, call: dict, fastest_exact_ar_ms: float) -> tuple[float, float]:
    """The projection of one call ({"call_ms", "overhead"}) with `tokens_per_step`: (over its own AR call,
    over the fastest exact AR call of its grid). The one place both ratios are computed."""
    return (tokens_per_step / (1 + call["overhead"]), tokens_per_step * fastest_exact_ar_ms / call["call_ms"])


def projection_at(grid: dict, n: int = PAPER_N) -> dict:
    """The projected speedup at N for every deployment of `grid` ({name: {"ar_ms", "by_n": {N: {"call_ms",
    "overhead"}}}}) that has N, with the paper's tokens/step at N:
    {"n", "tokens_per_step", "source" ("paper" | "inferred"), "baseline": (name, ms) the fastest exact AR call,
     "rows": {name: {"call_ms", "over_own_ar", "over_fastest_exact_ar"}}, "best": the deployment with the largest
     over_fastest_exact_ar}. Raises where the paper gives no tokens/step at N."""
    source = ceiling_provenance(n)
    if source is None:
        raise ValueError(f"the paper gives no tokens/step at N = {n}: a projection uses the paper's own points only")
    tps = float(PAPER["figure4_latency"]["acceptance_ceiling"][int(n)])
    base_name, base_ms = fastest_exact_ar(grid)
    rows = {}
    for name, d in grid.items():
        if not (isinstance(d, dict) and "by_n" in d and "ar_ms" in d):
            continue
        r = {int(k): v for k, v in d["by_n"].items()}.get(int(n))
        if r:
            own, fastest = speedups(tps, r, base_ms)
            rows[name] = {"call_ms": r["call_ms"], "over_own_ar": own, "over_fastest_exact_ar": fastest}
    best = max(rows, key=lambda k: rows[k]["over_fastest_exact_ar"]) if rows else None
    return {"n": int(n), "tokens_per_step": tps, "source": source, "baseline": (base_name, base_ms), "rows": rows,
            "best": best}


def tokens_label(p: dict) -> str:
    """How the numerator is named: "the paper's tokens/step 2.25", or "the paper's tokens/step 2.47 (inferred)" where
    Figure 4 does not print it (2.47 is Table 2's value at N = 32)."""
    return f"the paper's tokens/step {p['tokens_per_step']:.2f}" + (" (inferred)" if p["source"] == "inferred" else "")


def projection_sentence(p: dict) -> str:
    """The projection in words, every number from `p` (`projection_at`): the best deployment against the fastest AR
    call, its own-AR figure beside it."""
    base, ms = p["baseline"]
    best = p["rows"][p["best"]]
    text = (f"Projected at N = {p['n']} with {tokens_label(p)}: the fastest deployment's call ({p['best']}, "
            f"{best['call_ms']:.1f} ms) gives **{best['over_fastest_exact_ar']:.2f}x** against the fastest AR "
            f"call of the same grid ({base}, {ms:.2f} ms); against its own AR call it would be "
            f"{best['over_own_ar']:.2f}x" + (", a figure that flatters its slower AR call." if best["over_own_ar"] >
                                            best["over_fastest_exact_ar"] + 0.005 else "."))
    return text


def derived_paper_values() -> dict[str, str | None]:
    """The paper values this project derives or infers, as the notebooks show them, for the notebook check
    (`labelled_numbers.label_problems(..., derived=...)`): each derived overhead ("+0.236": ceiling / speedup - 1,
    no context word needed) and each inferred ceiling ("2.47", counted only beside the word "ceiling", since 2.47
    is also Table 2's printed tokens/step)."""
    f4 = PAPER["figure4_latency"]
    ceiling = {int(n): float(v) for n, v in f4["acceptance_ceiling"].items()}
    out: dict[str, str | None] = {}
    for d in f4["devices"].values():                  # as paper_figures.paper_figure4 derives them
        for key, speedup in d.items():
            n = int(key.split("_N")[1]) if key.startswith("speedup_at_N") else None
            if n in ceiling and f"overhead_at_N{n}" not in d:
                out[f"{ceiling[n] / float(speedup) - 1:+.3f}"] = None
    out.update({f"{ceiling[n]:.2f}": "ceiling" for n in ceiling if ceiling_provenance(n) == "inferred"})
    return out
