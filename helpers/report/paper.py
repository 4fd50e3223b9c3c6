"""The paper's numbers (`paper_numbers.yaml` beside this file, a copy of the paper's tables as data) and the few
values this project reads off them, each labelled with its provenance.

- Figure 4 prints the acceptance ceiling (tokens/step) at N = 16 and 64; at N = 32 the value (2.47) is Table 2's
  tokens/step taken as the ceiling, which `paper_numbers.yaml` marks inferred (`ceiling_inferred`). A number that is
  not the paper's as printed says so ("inferred", "derived"), never plain "paper".
- `paper_figure4`: the paper's devices, an overhead the paper does not print derived from its speedup and ceiling.
- Every paper number has a kind (`KINDS`): measured (timed or counted by the paper: Table 2's tokens/step, Figure
  4's call overheads), formula (Figure 4's speedups: its caption defines them as (tokens/step) / (1 + verify
  overhead), no frame was timed) or inferred (read off another table: the ceiling at N = 32). `paper_speedup` writes
  a Figure 4 speedup with its kind; `kind_problems` finds a text that calls one measured, or sets one beside a
  measured speedup of ours without saying it is a formula.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml


PAPER = yaml.safe_load((Path(__file__).parent / "paper_numbers.yaml").read_text())


PAPER_DRAFTERS = {"reused": "reused_lm_heads", "medusa": "medusa_heads", "offsets": "position_offsets"}


DRAFTER_NAMES = {"reused": "reused heads", "medusa": "Medusa heads", "offsets": "position offsets"}


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


KINDS = ("measured", "formula", "inferred")
FIGURE4_FORMULA = "tokens/step / (1 + verify overhead)"      # Figure 4's caption: how its speedups are computed
PAPER_DEVICES = {"iphone_17_pro_max": "iPhone 17 Pro Max", "macbook_m3_pro": "MacBook M3 Pro", "iphone_12": "iPhone 12"}


def paper_speedup(device: str = "macbook_m3_pro", n: int = 32) -> str:
    """A Figure 4 speedup with its kind: "2.13x by Figure 4's formula (M3 Pro, N = 32)"."""
    value = float(PAPER["figure4_latency"]["devices"][device][f"speedup_at_N{n}"])
    return f"{value:.2f}x by Figure 4's formula ({PAPER_DEVICES[device]}, N = {n})"


def formula_speedups() -> dict[str, set[str]]:
    """Figure 4's speedups as printed ("2.13x", ...), the paper's values of kind formula: {value: its devices}."""
    out: dict[str, set[str]] = {}
    for device, d in PAPER["figure4_latency"]["devices"].items():
        for k, v in d.items():
            if k.startswith("speedup_at_N"):
                out.setdefault(f"{float(v):.2f}x", set()).add(device)
    return out


# where a paper speedup is named: its device, or the paper's hardware alone
DEVICE_WORDS = {"iphone_17_pro_max": re.compile(r"iPhone|iphone|Neural Engine|\bANE\b|Apple"),
                "macbook_m3_pro": re.compile(r"M3|MacBook|macbook|Neural Engine|\bANE\b|Apple"),
                "iphone_12": re.compile(r"iPhone|iphone|Neural Engine|\bANE\b|Apple")}


def kind_problems(text: str) -> list[str]:
    """Lines (a table row is one) that set a Figure 4 speedup, named with its own device, beside the word "measured"
    (calling it measured, or comparing it with a measured speedup) without the word "formula": one line each. A
    value of ours that happens to equal one of the paper's, beside another device's name, is not one."""
    values = formula_speedups()
    problems = []
    for line in text.splitlines():
        found = [v for v, devices in values.items() if re.search(rf"(?<![\d.]){re.escape(v)}", line)
                 and any(DEVICE_WORDS[d].search(line) for d in devices)]
        if found and re.search(r"\bmeasured\b", line, re.I) and "formula" not in line.lower():
            problems.append(f"the paper's {found[0]} (a formula) beside 'measured': {line.strip()[:100]!r}")
    return problems


PAPER_DEVICE_NAMES = {key: f"{name} (ANE, W8A16)" for key, name in PAPER_DEVICES.items()}


def paper_points() -> dict[int, float]:
    """The paper's tokens/step where it reports one: its Figure 4 ceiling, {N: tokens/step} at N = 16, 32, 64."""
    return {int(k): float(v) for k, v in PAPER["figure4_latency"]["acceptance_ceiling"].items()}


def paper_tokens_per_step(n: int) -> float | None:
    """The paper's tokens/step at tree size N where the paper reports it, else None (never interpolated)."""
    return paper_points().get(int(n))


# ------------------------------------------------------------------ Figure 4
def paper_figure4(figure4: dict) -> dict:
    """The paper's Figure 4 numbers (`paper_numbers.yaml` figure4_latency) as {"ceiling": {N: tokens/step},
    "devices": {name: {"speedup": {N: x}, "overhead": {N: o}, "derived": {N: o}}}}: overhead as reported, or
    derived where only the speedup is (o = ceiling(N) / speedup(N) - 1)."""
    ceiling = {int(n): float(v) for n, v in figure4["acceptance_ceiling"].items()}
    devices = {}
    for name, d in figure4["devices"].items():
        speedup = {int(k.split("_N")[1]): float(v) for k, v in d.items() if k.startswith("speedup_at_N")}
        overhead = {int(k.split("_N")[1]): float(v) for k, v in d.items() if k.startswith("overhead_at_N")}
        derived = {n: ceiling[n] / s - 1.0 for n, s in speedup.items() if n not in overhead and n in ceiling}
        devices[name] = {"speedup": speedup, "overhead": overhead, "derived": derived}
    return {"ceiling": ceiling, "devices": devices}


def paper_arithmetic(device_key: str = "macbook_m3_pro", n: int = 32) -> str:
    """Figure 4's formula run backwards on the paper's own numbers at N: speedup x (1 + verify overhead) is the
    tokens/step its curve used, set against the ceiling this project reads for N."""
    d = PAPER["figure4_latency"]["devices"][device_key]
    tps = float(PAPER["figure4_latency"]["acceptance_ceiling"][n])
    cost, reported = 1 + d[f"overhead_at_N{n}"], d[f"speedup_at_N{n}"]
    label = " (inferred: Table 2's tokens/step)" if ceiling_provenance(n) == "inferred" else ""
    return (f"on the {PAPER_DEVICES[device_key]}, Figure 4's {reported:.2f}x is its formula, {FIGURE4_FORMULA}: "
            f"{reported:.2f} x {cost:.3f} = {reported * cost:.2f} tokens/step at N = {n}, against the ceiling "
            f"{tps:.2f}{label}; no frame was timed")


def derived_paper_values() -> dict[str, str | None]:
    """The paper values this project derives or infers, as the notebooks show them, for the notebook check
    (`labelled_numbers.label_problems(..., derived=...)`): each derived overhead ("+0.236": ceiling / speedup - 1,
    no context word needed) and each inferred ceiling ("2.47", counted only beside the word "ceiling", since 2.47
    is also Table 2's printed tokens/step)."""
    f4 = PAPER["figure4_latency"]
    ceiling = {int(n): float(v) for n, v in f4["acceptance_ceiling"].items()}
    out: dict[str, str | None] = {}
    for d in f4["devices"].values():                  # as paper_figure4 derives them
        for key, speedup in d.items():
            n = int(key.split("_N")[1]) if key.startswith("speedup_at_N") else None
            if n in ceiling and f"overhead_at_N{n}" not in d:
                out[f"{ceiling[n] / float(speedup) - 1:+.3f}"] = None
    out.update({f"{ceiling[n]:.2f}": "ceiling" for n in ceiling if ceiling_provenance(n) == "inferred"})
    return out
