"""Numbers that must say where they come from, checked in an executed notebook:

- a **latency** (milliseconds: "12.3 ms", a column "frame ms", a key "call_ms_p50") names the machine it was
  measured on: the same output (for a long report, the same section) says "Measured on ..."
  (`helpers.measure.machine.measured_on`);
  a **duration** ("129 s", "7.4 min") likewise, and so does the caption of a figure with a timing axis (read from
  the figure's record in its output metadata, `helpers.report.plots.figure_record`);
- a **derived or inferred paper value** (a paper overhead computed from its speedup, the ceiling at N = 32 read off
  Table 2) says "derived" or "inferred" wherever "paper" is said of it;
- a **paper tokens/step** at a tree size N the paper does not report is labelled "interpolated" or "extrapolated"
  on the same line or table row (the paper reports its Figure 4 ceiling at N = 16, 32, 64 only);
- a **paper speedup** (Figure 4's, a formula) is never called measured, nor set beside a measured speedup without
  the word "formula" on its line (`helpers.report.paper.kind_problems`).

    problems = label_problems(nb, paper_points={16, 32, 64})

Run with `helpers.experiment.run.notebook_check.output_problems` by the notebook test, over every executed notebook.
"""

from __future__ import annotations

import re

from helpers.experiment.run.notebook_check import output_text
from helpers.measure.machine import LABEL
from helpers.report.paper import kind_problems

MILLISECONDS = re.compile(r"(?<![A-Za-z])ms(?![A-Za-z])")          # "3 ms", "ms/frame", "frame ms", "call_ms_p50"
DURATION = re.compile(r"\d\s?(?:s|sec|seconds?|min|minutes?)\b")       # "129 s", "7.4 min", "2 minutes"
# a timing axis: "ms", "time", "seconds"; not a rate ("calls per second of audio")
TIMING_AXIS = re.compile(r"(?<![A-Za-z])ms(?![A-Za-z])|\btime\b|(?<!per )\bseconds?\b", re.IGNORECASE)
NOT_THE_PAPERS = re.compile(r"derived|inferred", re.IGNORECASE)
TREE_SIZE = re.compile(r"\bN\s?=\s?(\d+)")
LABELLED = re.compile(r"interpolat|extrapolat", re.IGNORECASE)


def sections(text: str) -> list[str]:
    """A text cut at its Markdown headings: a long report's sections, each checked on its own."""
    return re.split(r"\n(?=#)", text)


def unlabelled_latency(text: str) -> bool:
    """Whether a section of the text shows a latency or a duration ("ms", "129 s", "7.4 min") without its machine."""
    return any((MILLISECONDS.search(s) or DURATION.search(s)) and LABEL.lower() not in s.lower()
               for s in sections(text))


def unlabelled_derived(text: str, derived: dict[str, str | None]) -> list[str]:
    """Lines or table cells that call a derived or inferred paper value the paper's. derived: {literal as shown
    ("+0.236", "2.47"): a word that must also be there for the literal to be that value ("ceiling"), or None}. A
    sentence or row is flagged where it says "paper" (a table cell: its column's header does), holds the literal,
    and says neither "derived" nor "inferred"."""
    bad = []
    for line, row in _rows(text):
        cells = [(h, c) for h, c in row.items() if re.search(r"paper", h, re.I)] if row else []
        places = cells + ([("", line)] if re.search(r"paper", line, re.I) else [])
        for literal, context in derived.items():
            for head, where in places:
                if literal in where and not NOT_THE_PAPERS.search(where) and not NOT_THE_PAPERS.search(head) and (
                        context is None or context in (head + line).lower()):
                    bad.append(f"{literal}: {line.strip()[:80]!r}")
                    break
    return bad


def _rows(text: str):
    """(sentence or row, {header: cell}) for every sentence of the text and every Markdown table row; the dict is
    filled for table rows only."""
    header = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if cells is None:
            header = None
            yield from ((sentence, {}) for sentence in re.split(r"(?<=[.;!?])\s+(?=[A-Z*(])", line))
            continue
        if header is None:
            header = cells
        elif set("".join(cells)) <= set("-: "):
            pass
        else:
            yield line, dict(zip(header, cells))
            continue
        yield line, {}


def paper_tree_sizes(line: str, row: dict) -> list[int]:
    """The tree sizes N a sentence or table row pairs with the paper's tokens/step: "N = k" in its text, "N=k" in a
    column's header, the leading integer of a column headed "best N" (columns of the miniature's own aside)."""
    sizes = [int(n) for n in TREE_SIZE.findall(line)]
    for head, cell in row.items():
        if "miniature" in head:                   # a column of the miniature's own tokens/step, not the paper's
            continue
        sizes += [int(n) for n in TREE_SIZE.findall(head) if cell not in ("", "-")]
        lead = re.match(r"(\d+)\b", cell)
        if re.search(r"\bbest N\b", head) and lead:
            sizes.append(int(lead.group(1)))
    return sizes


def unlabelled_paper_values(text: str, paper_points: set[int]) -> list[str]:
    """Lines that use the paper's tokens/step at an N it does not report, without saying so."""
    bad = []
    for line, row in _rows(text):
        if re.search(r"paper", line, re.IGNORECASE) and "tokens/step" in line and not LABELLED.search(line):
            off = sorted({n for n in paper_tree_sizes(line, row) if n not in paper_points})
            if off:
                bad.append(f"N = {', '.join(map(str, off))}: {line.strip()[:80]!r}")
    return bad


def label_problems(nb, paper_points: set[int], derived: dict[str, str | None] | None = None) -> list[str]:
    """Every unlabelled latency or duration, unlabelled paper value, derived value called the paper's (`derived`, as
    `helpers.report.paper.derived_paper_values()` gives it), paper formula called measured (`kind_problems`) and timing
    figure whose caption names no machine of an executed notebook `nb`, one line each."""
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        outputs = cell.get("outputs", [])
        for k, output in enumerate(outputs):
            axes = (output.get("metadata", {}).get("figure") or {}).get("axes", [])
            timing = [a["label"] for a in axes if TIMING_AXIS.search(a["label"])]
            caption = output_text(outputs[k + 1]) if k + 1 < len(outputs) else ""
            if timing and LABEL.lower() not in caption.lower():
                problems.append(f"cell {i}: a figure of timings ({timing[0]!r}) whose caption does not say "
                                f"'{LABEL} <machine>'")
            text = output_text(output)
            problems += [f"cell {i}: {p}" for p in kind_problems(text)]
            problems += [f"cell {i}: a derived or inferred value called the paper's, {b}"
                         for b in unlabelled_derived(text, derived or {})]
            if unlabelled_latency(text):
                first = next(line for line in text.splitlines() if MILLISECONDS.search(line) or DURATION.search(line))
                problems.append(f"cell {i}: a latency without '{LABEL} <machine>': {first.strip()[:80]!r}")
            problems += [f"cell {i}: the paper's tokens/step at {b} is not labelled interpolated or extrapolated"
                         for b in unlabelled_paper_values(text, paper_points)]
    return problems
