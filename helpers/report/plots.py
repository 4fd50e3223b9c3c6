"""The figures' common ground, and the figures of drafting that notebooks 02-04 draw (matplotlib/seaborn). Each
drawing function returns a Figure; `save` writes it as PNG.

- Common ground: `save`, the tick helpers (`readable_ticks`, `powers_of_two`, `tree_size_label`), `running_mean`,
  and what a figure says about itself, `mark` / `figure_record`: each axis's scale and label and each legend entry
  with the provenance of the points it names, kept beside the figure's image in the notebook so that the notebook
  check (`helpers.experiment.run.notebook_check`) can read it. A helper marks points that are not the paper's as
  printed with `mark(artist, "derived")` (or "inferred"): the artist's gid carries the provenance, and a legend entry
  of such points that calls them "paper" without saying "derived" / "inferred" is a problem the check reports.
- The figures of drafting: training curves, top-m accuracy, tokens/step against N, per-language bars, the target's
  sharpness, the diagnostics' acceptance, translation and codebook figures.

Beside it: `helpers.report.decoding_figures` (the draft tree, the paper's Figures 1-3) and
`helpers.report.speed_figures` (the paper's Figure 4, a round's phases).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

if not matplotlib.get_backend().lower().startswith(("module://matplotlib_inline", "module://ipykernel")):
    matplotlib.use("Agg")                    # headless (tests, papermill without a display)
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import seaborn as sns

from helpers.artifacts import atomic_write


sns.set_theme(style="whitegrid", context="notebook")


def save(fig, folder: str | Path, name: str) -> Path:
    """Write `<folder>/<name>.png` atomically; returns the path."""
    return atomic_write(Path(folder) / f"{name}.png", lambda p: fig.savefig(p, format="png", dpi=120,
                                                                            bbox_inches="tight"))


def spaced(values, positions, min_gap: float, prefer=()) -> list:
    """The values to label: `prefer` first (in its order), then the rest from the smallest, each kept only if its
    position lies at least `min_gap` from every kept one's (positions: one per value, in any unit)."""
    where = dict(zip(values, positions))
    kept = []
    for v in [v for v in prefer if v in where] + sorted(v for v in where if v not in prefer):
        if all(abs(where[v] - where[k]) >= min_gap for k in kept):
            kept.append(v)
    return sorted(kept)


def readable_ticks(ax, values, axis: str = "x", prefer=(), min_inches: float = 0.4, fmt=lambda v: f"{v:g}") -> list:
    """Tick `values` on an axis (linear or log, limits already set) with labels that cannot collide: only a subset no
    two of which lie closer than `min_inches` carries a label (`spaced`, `prefer` first); the others stay as
    unlabelled minor ticks with a faint grid line. Returns the labelled values."""
    values = sorted(set(values))
    a = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    box = ax.get_position()
    inches = (box.width * ax.figure.get_figwidth()) if axis == "x" else (box.height * ax.figure.get_figheight())
    f = np.log10 if a.get_scale() == "log" else np.asarray
    span = abs(float(f(hi) - f(lo))) or 1.0
    labelled = spaced(values, [float(f(v)) / span * inches for v in values], min_inches, prefer)
    rest = [v for v in values if v not in labelled]
    a.set_ticks(labelled, [fmt(v) for v in labelled])
    a.set_ticks(rest, [""] * len(rest), minor=True)
    if rest:
        ax.grid(True, which="minor", axis=axis, color="0.8", lw=0.6, ls=":")
    return labelled


def powers_of_two(values) -> list:
    """The values that are powers of two, largest first (the tick labels to prefer on an axis of tree sizes)."""
    return sorted((v for v in values if v >= 1 and float(np.log2(v)).is_integer()), reverse=True)


def tree_size_label(thinned: bool) -> str:
    """The x label of an axis of tree sizes N on a log scale; thinned: some N carry no label (a dotted line)."""
    return "tree size N (nodes, log scale" + ("; dotted: unlabelled N)" if thinned else ")")


def running_mean(x, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Trailing running mean of x over `window` steps: (step of each mean, 1-based, the window's last step; means).
    Shorter than the window: x itself at its own steps."""
    x = np.asarray(x, float)
    if len(x) < window or window <= 1:
        return np.arange(1, len(x) + 1), x
    return np.arange(window, len(x) + 1), np.convolve(x, np.ones(window) / window, mode="valid")


PROVENANCES = ("derived", "inferred")


def mark(artist, provenance: str):
    """Tag a plotted artist with where its values come from ("derived" or "inferred"); returns the artist."""
    if provenance not in PROVENANCES:
        raise ValueError(f"provenance must be one of {PROVENANCES}, got {provenance!r}")
    artist.set_gid(provenance)
    return artist


def figure_record(fig) -> dict:
    """{"axes": [{"axis": "x" | "y", "scale": "linear" | "log" | ..., "label": str}, ...] for every axis of every
    subplot, "legend": [{"label": str, "provenance": "derived" | "inferred" | None}, ...] for every legend entry}."""
    axes, legend = [], []
    for ax in fig.axes:
        axes += [{"axis": "x", "scale": ax.get_xscale(), "label": ax.get_xlabel()},
                 {"axis": "y", "scale": ax.get_yscale(), "label": ax.get_ylabel()}]
        handles, labels = ax.get_legend_handles_labels()
        legend += [{"label": label, "provenance": _provenance(h)} for h, label in zip(handles, labels)]
    return {"axes": axes, "legend": legend}


def _provenance(handle) -> str | None:
    """A legend handle's provenance mark: its gid, or its first artist's for a container (a bar chart's bars)."""
    artist = handle[0] if not hasattr(handle, "get_gid") and len(handle) else handle
    gid = artist.get_gid() if hasattr(artist, "get_gid") else None
    return gid if gid in PROVENANCES else None


def loss_curves(history: dict[str, list[float]], window: int = 50):
    """Training loss per step, one line per drafter: the running mean over `window` steps (solid, plotted at the
    window's last step), every step faint behind it. A run shorter than 5 windows gets a window of a fifth of its
    shortest curve (the legend says which)."""
    shortest = min((len(v) for v in history.values()), default=0)
    window = min(window, max(1, shortest // 5))
    fig, ax = plt.subplots(figsize=(7.5, 3.5))
    for i, (name, losses) in enumerate(history.items()):
        if window > 1:
            ax.plot(np.arange(1, len(losses) + 1), losses, color=f"C{i}", lw=0.5, alpha=0.18)
        ax.plot(*running_mean(losses, window), color=f"C{i}", lw=1.8, label=name)
    ax.set(xlabel="training step (batch)", ylabel="summed draft cross-entropy\n(nats per frame)",
           title="Drafter training")
    ax.legend(title=f"running mean over {window} steps\n(faint: every step)" if window > 1 else "every step",
              title_fontsize=8, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def topm_accuracy(tables: dict[str, list[list[float]]], title: str, ylabel: str = "top-m accuracy"):
    """Top-m draft accuracy per depth: cumulative a[d][r] over ranks; one panel per depth. `ylabel` names what is
    cumulated (notebook 03 plots acceptance, not accuracy against data)."""
    depth = len(next(iter(tables.values())))
    fig, axes = plt.subplots(1, depth, figsize=(3.2 * depth, 3.3), sharey=True, squeeze=False, layout="constrained")
    markers = ("o", "s", "^", "D", "v", "P")
    for j, ax in enumerate(axes[0]):
        for i, (name, a) in enumerate(tables.items()):       # close curves stay visible: each its marker and dash
            top_m = np.cumsum(a[j])
            ax.plot(np.arange(1, len(top_m) + 1), top_m, marker=markers[i % len(markers)], ms=4.5 - 0.5 * (i % 3),
                    ls="-" if i == 0 else EXPECTED_STYLES[(i - 1) % len(EXPECTED_STYLES)], lw=1.4,
                    label=name, zorder=3 + i)
        ax.set(title=f"depth {j + 1}", xlabel="m (drafts kept)", ylim=(0, 1))
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes[0][0].set_ylabel(ylabel)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncol=len(tables), fontsize=9,
               frameon=False)
    fig.suptitle(title)
    return fig


EXPECTED_STYLES = ("--", "-.", ":", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 1)), (0, (8, 3)))   # one per drafter


EXPECTED_MARKERS = "x+1*23"                                # small, unfilled: unlike the measured points' "osD^vP"


def tokens_vs_tree_size(expected: dict[str, dict[int, float]], measured: dict[str, dict[int, float]] | None = None):
    """Tokens per call vs tree size N: expected (broken lines, each drafter its own dash pattern, marker and width,
    earlier drafters wider, so that lines of nearly equal values show as stripes), measured (hollow markers)."""
    fig, ax = plt.subplots(figsize=(7.5, 3.5))
    markers, count = "osD^vP", len(expected)
    for i, (name, by_n) in enumerate(expected.items()):
        ns = sorted(by_n)
        wider = count - 1 - i                                  # earlier lines wider: equal values show as stripes
        ax.plot(ns, [by_n[n] for n in ns], ls=EXPECTED_STYLES[i % len(EXPECTED_STYLES)],
                marker=EXPECTED_MARKERS[i % len(EXPECTED_MARKERS)], ms=6 + 2 * wider, lw=1.2 + 1.2 * wider,
                color=f"C{i}", alpha=0.85, label=f"{name}: expected")
        if measured and name in measured:
            mn = sorted(measured[name])
            shift = 1 + 0.06 * (i - (count - 1) / 2)          # side by side on the log axis: none hides another
            ax.plot([n * shift for n in mn], [measured[name][n] for n in mn], marker=markers[i % len(markers)],
                    mfc="none", ls="-", color=f"C{i}", label=f"{name}: measured (evaluation frames)")
    ax.set(xscale="log", ylabel="tokens/step (codes per call)", title="Tokens/step vs tree size")
    ns = sorted(next(iter(expected.values())))
    ax.set_xlabel(tree_size_label(len(readable_ticks(ax, ns, prefer=powers_of_two(ns))) < len(ns)))
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def per_language(rows: dict[str, dict], key: str, ylabel: str, paper: dict[str, float] | None = None):
    """A bar per language of `rows[lang][key]`, the paper's value as a marker where given."""
    langs = list(rows)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar(langs, [rows[c][key] for c in langs], color="C0", label="this run")
    if paper:
        ax.scatter([c for c in langs if c in paper], [paper[c] for c in langs if c in paper], color="C3",
                   marker="D", zorder=3, label="paper")
    ax.set(xlabel="language", ylabel=ylabel)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def target_sharpness(entropy: list[float], top_prob: list[float]):
    """Entropy and top probability of the target p_t per code position: what acceptance is capped by."""
    fig, (ent, top) = plt.subplots(2, 1, figsize=(6, 4.4), sharex=True, layout="constrained")
    t = np.arange(1, len(entropy) + 1)
    ent.plot(t, entropy, marker="o", color="C0")
    ent.set(ylabel="entropy (nats)", ylim=(0, None), title="How confident the code predictor is")
    top.plot(t, top_prob, marker="s", color="C1")
    top.set(xlabel="code position t", ylabel="top probability", ylim=(0, 1), xticks=t)
    return fig


def draft_acceptance_by_position(diag, names: list[str] | None = None):
    """Diagnostics (`helpers.method.diagnostics.Diagnostics`): acceptance E[p_target(rank-0 draft)] of c_{t+j} vs
    start position t, one panel per depth j, one line per drafter ("own": H_{t+j} on h_{t+j}, no mismatch)."""
    names = names or [k for k in diag.scores if k != "own_ideal_frames"]
    fig, axes = plt.subplots(1, diag.depth, figsize=(3.6 * diag.depth, 3.6), sharey=True, squeeze=False,
                             layout="constrained")
    for j, ax in enumerate(axes[0]):
        for i, name in enumerate(names):
            s = diag.scores[name]
            acc = s.acceptance[:, j].numpy()
            t = np.arange(1, len(acc) + 1)
            ax.plot(t, acc, marker="o" if name == "ideal" else ".", ls=":" if name == "ideal" else "-",
                    color="k" if name == "own" else f"C{i}", label=f"{name} (n={s.frames})")
        ax.set(title=f"depth j = {j + 1}", xlabel="start position t (drafting c_{t+j})")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    top = max(float(diag.scores[name].acceptance.nan_to_num(0.0).max()) for name in names)
    axes[0][0].set_ylim(0, min(1.0, top) * 1.05 if top > 0 else 1.0)     # every panel's every point inside (shared y)
    axes[0][0].set_ylabel("acceptance E[p_target(draft)]")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6), fontsize=8, frameon=False)
    fig.suptitle("Rank-0 draft acceptance per position, teacher-forced validation (n = frames)")
    return fig


def translation_constancy(diag):
    """Cosine of each start's mean displacement E[h_{t+j} - h_t] to the mean over t, after (solid) and before
    (dashed) the final norm; the legend gives the share of the displacement one shared vector explains."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2), layout="constrained")
    for key, ls in (("normed", "-"), ("prenorm", "--")):
        c = diag.translation.get(key)
        if c is None:
            continue
        for j in range(diag.depth):
            cos = c.cosine[:, j].numpy()
            ax.plot(np.arange(1, len(cos) + 1), cos, ls=ls, marker=".", color=f"C{j}",
                    label=f"j={j + 1}, {'after' if key == 'normed' else 'before'} norm "
                          f"(shared vector explains {float(c.shared_share[j]):.1%})")
    ax.set(xlabel="start position t", ylabel="cosine(m_t,j , mean over t)", ylim=(-1.05, 1.05),
           title="Is h_{t+j} - h_t one vector for every t? (1 = a translation)")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", fontsize=7, ncol=2, frameon=False)
    return fig


def codebook_usage(usage):
    """Per codebook c1..c15: unigram entropy (bits) beside log2(codebook size), and the top code's share."""
    c = np.arange(1, len(usage.entropy_bits) + 1)
    fig, ax = plt.subplots(figsize=(6.5, 3.6), layout="constrained")
    ax.bar(c, usage.max_bits.numpy(), color="0.85", label="log2(codebook size): uniform use")
    ax.bar(c, usage.entropy_bits.numpy(), color="C0", label="unigram entropy")
    ax.set(xlabel="codebook (code position)", ylabel="bits", xticks=c,
           title=f"Codebook usage ({usage.frames} frames)")
    twin = ax.twinx()
    twin.plot(c, usage.top_share.numpy(), color="C3", marker="s", label="top code's share")
    twin.set(ylabel="share of frames", ylim=(0, 1))
    twin.grid(False)
    lines = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    fig.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="outside lower center", ncol=3, frameon=False)
    return fig
