"""The figures more than one notebook draws (matplotlib/seaborn), the paper's four redrawn from a run's own data, and
what a figure says about itself. Each drawing function returns a Figure; `save` writes it as PNG.

- Shared figures: training curves, top-m accuracy, tree drawings, tokens/step against N, per-language bars, the
  target's sharpness, a round's phases, the diagnostics' acceptance, translation and codebook figures; tick helpers
  (`readable_ticks`, `powers_of_two`).
- `nested_loops` (Figure 1): the talker's outer loop (one call per 80 ms frame) around the code predictor's inner
  loop (15 codes), and the sequential calls per frame and per second, AR and speculative (`loop_calls`).
- `tree_packing` (Figure 2): one real round (`helpers.method.rounds.RoundRecord`): the tree with its tokens, the
  packed query, the call's mask with the cache columns, the RoPE position ids, the accepted path highlighted.
- `one_call` (Figure 3): the AR path and the speculative path inside one call, with the offset block, drawn from
  the run's K and hidden size and the accepted code and drafts of one real round.
- `speedup_and_overhead` (Figure 4): speedup vs N on this run's device beside the paper's devices, each beside its
  own acceptance ceiling (tokens/step), and the call cost vs query length (log axes).
- `mark` / `figure_record`: each axis's scale and label and each legend entry with the provenance of the points it
  names, kept beside the figure's image in the notebook so that the notebook check
  (`helpers.experiment.run.notebook_check`) can read it. A helper marks points that are not the paper's as printed with
  `mark(artist, "derived")` (or "inferred"): the artist's gid carries the provenance, and a legend entry of such
  points that calls them "paper" without saying "derived" / "inferred" is a problem the check reports.
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
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from helpers.artifacts import atomic_write
from helpers.method.decoding import Decoder, FrameResult
from helpers.method.sampler import frame_uniforms
from helpers.method.rounds import RoundRecord, round_records
from helpers.method.tree import SparseTree
from helpers.report.paper import PAPER_DEVICES, ceiling_provenance


if not matplotlib.get_backend().lower().startswith(("module://matplotlib_inline", "module://ipykernel")):
    matplotlib.use("Agg")                    # headless (tests, papermill without a display)


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


def tree_drawing(tree: SparseTree, title: str = ""):
    """The draft tree: depth left to right, each node labelled with its draft rank."""
    fig, ax = plt.subplots(figsize=(6, max(2.5, 0.22 * tree.size)))
    order = sorted(range(1, tree.size + 1), key=lambda i: tree.paths[i - 1])     # depth-first: subtrees together
    y = {i: -float(row) for row, i in enumerate(order)}
    y[0] = float(np.mean([y[i] for i in range(1, tree.size + 1) if tree.depth_list[i] == 1]))
    for i in range(1, tree.size + 1):
        parent = int(tree.parent[i])
        ax.plot([tree.depth_list[parent], tree.depth_list[i]], [y[parent], y[i]], color="0.6", lw=1, zorder=1)
    for i in range(tree.size + 1):
        ax.scatter(tree.depth_list[i], y[i], s=160, color="C1" if i == 0 else "C0", zorder=2)
        ax.annotate("root" if i == 0 else str(int(tree.rank[i])), (tree.depth_list[i], y[i]), ha="center",
                    va="center", fontsize=7, color="white", zorder=3)
    ax.set(xticks=range(tree.max_depth + 1), xticklabels=["c_t"] + [f"+{d}" for d in range(1, tree.max_depth + 1)],
           yticks=[], xlabel="draft depth (codebook positions past the last committed code c_t)",
           ylabel="nodes (depth-first)", title=title or f"Draft tree, N = {tree.size} (labels: draft rank)")
    ax.grid(False)
    return fig


def attention_mask(tree: SparseTree, title: str = ""):
    """The tree attention mask (query x query, root first): a node sees the root, its ancestors and itself."""
    fig, ax = plt.subplots(figsize=(4.5, 4))
    sns.heatmap(tree.mask.numpy().astype(int), cmap="Blues", cbar=False, square=True, ax=ax,
                xticklabels=False, yticklabels=False)
    ax.set(xlabel="key (root, then nodes by depth)", ylabel="query", title=title or f"Tree attention mask, N = {tree.size}")
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


def round_phases(profile: dict, device: str):
    """Where the time goes (`profile.round_profile`): ms per AR step and per speculative round, stacked by
    phase (round work = query + walk + commit), AR step / round written above each speculative bar."""
    parts = {"layers": ("layers",), "heads (+ drafts)": ("heads",), "sample": ("sample",),
             "round work: query, walk, commit": ("query", "walk", "commit")}
    trees = dict(sorted(profile["trees"].items(), key=lambda kv: int(kv[0])))     # by N, whatever the key type
    rows = {"AR\nstep": profile["ar"], **{str(n): r for n, r in trees.items()}}
    fig, ax = plt.subplots(figsize=(max(6.5, 3.5 + 0.45 * len(rows)), 3.6))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for label, phases in parts.items():
        ms = np.array([sum(r.get(p, 0.0) for p in phases) for r in rows.values()])
        ax.bar(x, ms, bottom=bottom, label=label)
        bottom += ms
    for i, r in enumerate(trees.values(), start=1):
        ax.annotate(f"{r['ratio']:.2f}", (i, bottom[i]), ha="center", va="bottom", fontsize=8)
    ax.axhline(bottom[0], color="0.3", lw=0.8, ls="--", label="one AR step")
    ax.set_xticks(x, list(rows), rotation=90 if len(rows) > 14 else 0)
    ax.set(xlabel="speculative round at tree size N (first bar: one AR step)", ylabel="ms per AR step / per round",
           ylim=(0, 1.1 * bottom.max()), title=f"Where a round's time goes on {device} (above: AR step / round)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
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


PATH_COLOR, DRAFT_COLOR, CACHE_COLOR, AR_COLOR = "#2ca02c", "#1f77b4", "0.72", "#2ca02c"


SHOWN = 6                                  # drafts per depth drawn in Figure 3


# ------------------------------------------------------------------ Figure 1
def loop_calls(frames_per_second: float, num_codes: int, tokens_per_step: float) -> dict:
    """Sequential calls of the two loops: per frame and per second of audio, AR and speculative.

    num_codes: residual codes per frame (15); tokens_per_step: codes per inner call with speculation.
    -> {"ar": {"outer", "inner", "total"} per frame and "per_second": {...}, "speculative": the same}."""
    if not tokens_per_step >= 1.0:
        raise ValueError(f"tokens_per_step={tokens_per_step} must be >= 1 (one code per call at least)")
    out = {}
    for name, inner in (("ar", float(num_codes)), ("speculative", num_codes / tokens_per_step)):
        frame = {"outer": 1.0, "inner": inner, "total": 1.0 + inner}
        out[name] = {**frame, "per_second": {k: v * frames_per_second for k, v in frame.items()}}
    out["tokens_per_step"], out["frames_per_second"], out["num_codes"] = tokens_per_step, frames_per_second, num_codes
    return out


@torch.no_grad()
def frames_tokens_per_step(decoder: Decoder, g: torch.Tensor, c0: torch.Tensor, seed: int) -> float:
    """Codes per inner call of `decoder` over frames g [F, H_talker], c0 [F] (uniforms from `seed`): 15 F / calls."""
    p = decoder.predictor
    u = frame_uniforms(torch.Generator().manual_seed(seed), p.num_codes, batch=g.shape[0], device=p.device)
    calls = sum(decoder.decode_frame(g[f:f + 1], c0[f:f + 1], u[f:f + 1]).calls for f in range(g.shape[0]))
    return p.num_codes * g.shape[0] / calls


def _box(ax, x, y, w, h, text, color, fontsize=9, **kw):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", fc=color, ec="0.25", lw=1, **kw))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, a, b, color="0.25", style="-|>", ls="-", rad=0.0, lw=1.2):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=12, color=color, ls=ls, lw=lw,
                                 connectionstyle=f"arc3,rad={rad}"))


def nested_loops(run: dict, run_label: str, paper: dict | None = None):
    """Figure 1. run: `loop_calls` of this run; paper: `loop_calls` at the paper's tokens/step (or None)."""
    fig, (ax, bars) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1.25, 1]})
    ax.set(xlim=(0, 10), ylim=(0, 6), title="Two nested loops per 80 ms frame")
    ax.axis("off")
    n = run["num_codes"]
    _box(ax, 0.3, 3.8, 3.2, 1.3, "talker (outer loop)\n1 call per frame\nemits c0", "#fde68a")
    _box(ax, 5.0, 3.8, 4.6, 1.3, f"code predictor (inner loop)\n{n} sequential calls (AR)\n"
         f"step k: c(k-1) -> c(k), k = 1..{n}", "#bfdbfe")
    _arrow(ax, (3.5, 4.45), (5.0, 4.45))
    ax.text(4.25, 4.65, "g, c0", ha="center", fontsize=8)
    _arrow(ax, (8.6, 5.1), (6.0, 5.1), rad=0.6)
    ax.text(7.3, 5.75, f"x{n}", ha="center", fontsize=9)
    _arrow(ax, (7.3, 3.8), (1.9, 3.8), rad=-0.35)
    ax.text(4.6, 2.55, f"frame c0..c{n} summed with the next text token -> next talker call", ha="center", fontsize=8)
    spec = run["speculative"]
    ax.text(0.3, 1.4, f"AR: 1 + {n} = {run['ar']['total']:.0f} calls/frame, "
            f"{run['ar']['per_second']['total']:.1f} calls/s at {run['frames_per_second']:g} frames/s\n"
            f"speculative ({run_label}):\n    at {run['tokens_per_step']:.2f} tokens/step, 1 + {n}/{run['tokens_per_step']:.2f}"
            f" = {spec['total']:.2f} calls/frame, {spec['per_second']['total']:.1f} calls/s", fontsize=8, va="top")
    systems = {"AR": run["ar"], f"speculative\nthis run\n{run['tokens_per_step']:.2f} tok/step": spec}
    if paper:                                   # short tick labels (the run's details are in the left panel)
        systems[f"speculative\npaper\n{paper['tokens_per_step']:.2f} tok/step"] = paper["speculative"]
    x = np.arange(len(systems))
    outer = [s["per_second"]["outer"] for s in systems.values()]
    inner = [s["per_second"]["inner"] for s in systems.values()]
    bars.bar(x, outer, color="#fbbf24", label="talker (outer)")
    bars.bar(x, inner, bottom=outer, color="#60a5fa", label="code predictor (inner)")
    for i, s in enumerate(systems.values()):
        bars.text(i, s["per_second"]["total"], f"{s['per_second']['total']:.1f}", ha="center", va="bottom", fontsize=8)
    bars.set_xticks(x, list(systems), fontsize=8)
    bars.set(ylabel="sequential calls per second of audio", ylim=(0, 1.2 * max(s["per_second"]["total"]
                                                                             for s in systems.values())),
             title="Calls per second of audio")
    bars.legend(fontsize=8, loc="upper right")
    sns.despine(ax=bars)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ Figure 2
def example_round(decoder: Decoder, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor,
                  min_accepted: int = 1) -> tuple[int, int, RoundRecord, FrameResult]:
    """The first round, in frame order, that accepted at least `min_accepted` drafts (else frame 0's first round).
    g [F, H_talker], c0 [F], u [F, 15] on the decoder's device. -> (frame, round index, record, the frame's result)"""
    first = None
    for f in range(g.shape[0]):
        result = decoder.decode_frame(g[f:f + 1], c0[f:f + 1], u[f:f + 1])
        for i, record in enumerate(round_records(decoder, result)):
            if record.accepted >= min_accepted:
                return f, i, record, result
            first = first or (f, i, record, result)
    if first is None:
        raise ValueError("no frame had a tree round (give at least one frame)")
    return first


def _node_label(record: RoundRecord, i: int) -> str:
    return f"c{record.t + record.depth[i]}={record.tokens[i]}"


def tree_packing(record: RoundRecord, c0: int, codes: list[int], title: str = ""):
    """Figure 2 from one real round. c0 and codes (c1..c15 of the frame) label the cache columns.

    Left: the tree (x: depth, label c_<position>=token; green: the accepted path). Right: the call's mask, rows
    and columns in query order (root first) behind the filled cache slots (grey: cache, blue: tree, green: rows
    of the accepted path), column headers token@RoPE position."""
    q, length = len(record.tokens), record.cache_length
    on_path = set(record.accepted_path)
    fig, (ax, mx) = plt.subplots(1, 2, figsize=(13, max(3.5, 0.32 * q + 1.8)),
                                 gridspec_kw={"width_ratios": [1, 1.6], "wspace": 0.45})
    index = {p: i for i, p in enumerate(record.paths)}
    y = {}
    for d in range(max(record.depth) + 1):
        nodes = [i for i in range(q) if record.depth[i] == d]
        for j, i in enumerate(nodes):
            y[i] = (len(nodes) - 1) / 2 - j
    for i in range(1, q):
        parent = index[record.paths[i][:-1]]
        both = i in on_path and parent in on_path
        ax.plot([record.depth[parent], record.depth[i]], [y[parent], y[i]], color=PATH_COLOR if both else "0.6",
                lw=2.5 if both else 1, zorder=1)
    for i in range(q):
        color = PATH_COLOR if i in on_path else (CACHE_COLOR if i == 0 else DRAFT_COLOR)
        ax.scatter(record.depth[i], y[i], s=900, color=color, zorder=2)
        ax.annotate(_node_label(record, i), (record.depth[i], y[i]), ha="center", va="center", fontsize=7,
                    color="white", zorder=3)
    ax.set(xticks=range(max(record.depth) + 1), xlabel="depth in the tree (code position t + depth)",
           yticks=[], title=f"Tree, N = {q - 1}, root c{record.t}\n(green: accepted path, {record.accepted} accepted)")
    ax.set_xticklabels([f"{d}\n(c{record.t + d})" for d in range(max(record.depth) + 1)])
    ax.set_xlim(-0.5, max(record.depth) + 0.5)
    ax.grid(False)

    visible = record.visible.cpu().numpy()
    cols = np.concatenate([visible[:, :length], visible[:, -q:]], axis=1)       # filled cache slots, then query
    shade = np.zeros(cols.shape, dtype=int)
    shade[:, :length][cols[:, :length]] = 1
    shade[:, length:][cols[:, length:]] = 2
    for i in on_path:
        shade[i][cols[i]] = 3
    mx.imshow(shade, cmap=ListedColormap(["white", CACHE_COLOR, DRAFT_COLOR, PATH_COLOR]), vmin=0, vmax=3,
              aspect="auto", interpolation="nearest")
    cache_names = ["g", f"c0={c0}"] + [f"c{j}={codes[j - 1]}" for j in range(1, length - 1)]
    xlabels = [f"{name}@{s}" for s, name in enumerate(cache_names)] + \
              [f"{record.tokens[i]}@{record.positions[i]}" for i in range(q)]
    mx.set_xticks(range(len(xlabels)), xlabels, rotation=90, fontsize=7)
    mx.set_yticks(range(q), [f"{i}: {_node_label(record, i)} @{record.positions[i]}" for i in range(q)], fontsize=7)
    mx.set_xticks(np.arange(-0.5, len(xlabels)), minor=True)
    mx.set_yticks(np.arange(-0.5, q), minor=True)
    mx.grid(which="minor", color="white", lw=0.8)
    mx.grid(which="major", visible=False)
    mx.axvline(length - 0.5, color="k", lw=1.2)
    mx.set(xlabel=f"key: {length} cache slots (token@RoPE position) | packed query, q = N + 1 = {q}",
           ylabel="query: index, c<pos>=token @RoPE position",
           title="The call's attention mask\n(grey: cache, blue: tree, green: rows of the accepted path)")
    fig.suptitle(title or f"Sparse tree attention packing, one real round (root at code position {record.t})", y=1.06)
    return fig


# ------------------------------------------------------------------ Figure 3
def one_call(record: RoundRecord, hidden_size: int, depth_k: int, offsets: bool = True, title: str = ""):
    """Figure 3: inside one call at runtime position k = record.t: the head of c_k reads h and emits the code that
    is always kept (the AR path, record.tokens[0]); the offset block turns h into h + b_1..h + b_K and the heads of
    c_{k+1}..c_{k+K} emit the drafts (record.drafts, by rank; green: the draft the next round accepted).
    depth_k: the drafter's K (the block holds K x H parameters; a round's tree may use fewer depths).
    offsets False: the reused heads (b = 0), the block passes h through unchanged."""
    k, drafts = record.t, record.drafts
    depth = len(drafts)
    fig, ax = plt.subplots(figsize=(10, 1.6 + 1.2 * (depth + 1)))
    top = depth + 1
    ax.set(xlim=(0, 11), ylim=(-0.6, top + 0.6))
    ax.axis("off")
    _box(ax, 0.2, top - 0.9, 2.1, 0.8, "decoder layers\n(one call)", "#e5e7eb")
    ax.text(1.25, top + 0.15, f"h (H = {hidden_size})", ha="center", fontsize=8)
    _box(ax, 4.3, top - 0.85, 2.0, 0.7, f"head of c{k}", "#d1fae5")
    _arrow(ax, (2.3, top - 0.5), (4.3, top - 0.5), color=AR_COLOR, lw=2)
    _box(ax, 7.3, top - 0.85, 1.3, 0.7, f"c{k} = {record.tokens[0]}", PATH_COLOR)
    _arrow(ax, (6.3, top - 0.5), (7.3, top - 0.5), color=AR_COLOR, lw=2)
    ax.text(8.8, top - 0.5, "AR path: sampled, always kept", va="center", fontsize=8, color=AR_COLOR)
    block = (f"offset\nblock\n(K x H =\n{depth_k} x {hidden_size}\n= {depth_k * hidden_size}\nparams)" if offsets
             else "no offset\n(b = 0:\nreused\nheads)")
    _box(ax, 2.5, 0.0, 1.1, depth - 0.2, block, "#fef3c7", fontsize=7)
    _arrow(ax, (1.25, top - 0.9), (2.5, (depth - 0.2) / 2), color=DRAFT_COLOR, ls="--")
    for j in range(1, depth + 1):
        yj = depth - j
        _arrow(ax, (3.65, yj + 0.35), (4.3, yj + 0.35), color=DRAFT_COLOR, ls="--")
        ax.text(3.97, yj + 0.45, f"h+b{j}", ha="center", fontsize=7, color=DRAFT_COLOR)
        _box(ax, 4.3, yj, 2.0, 0.7, f"head of c{k + j}", "#dbeafe")
        _arrow(ax, (6.3, yj + 0.35), (7.3, yj + 0.35), color=DRAFT_COLOR, ls="--")
        kept = record.committed[j - 1] if j - 1 < len(record.committed) - 1 else None
        for r, tok in enumerate(drafts[j - 1][:SHOWN]):
            _box(ax, 7.3 + 0.62 * r, yj, 0.55, 0.7, str(tok), PATH_COLOR if tok == kept else "#93c5fd", fontsize=7)
    ax.text(7.3, -0.45, f"drafts by rank (first {min(SHOWN, len(drafts[0]))} of the top-{len(drafts[0])} of each "
            "drafted head); green: accepted by the walk",
            fontsize=7, color=DRAFT_COLOR)
    used = "" if depth == depth_k else f" (this round's tree drafts {depth} of the K = {depth_k} positions)"
    ax.set_title((title or f"AR path and speculative path in one call, position k = {k}, K = {depth_k}") + used)
    return fig


def speedup_and_overhead(by_n: dict, device: str, frames: int, calls: int, paper: dict | None = None):
    """Figure 4. by_n: {N: {"tokens_per_step", "realised_speedup", "overhead"[, "measured_speedup"]}} of this run
    on `device` (`latency.latency_metrics`'s "by_n"), measured over `frames` frames and `calls` calls per size;
    paper: `paper_figure4(...)`. Left: speedup vs N, each set of devices under its own acceptance ceiling (dashed).
    Right: call cost relative to the AR call, 1 + overhead, vs query length q = N + 1 (log-log)."""
    ns = sorted(int(n) for n in by_n)
    row = {int(n): r for n, r in by_n.items()}
    fig, (ax, ov) = plt.subplots(1, 2, figsize=(12, 4.2))
    ax.plot(ns, [row[n]["tokens_per_step"] for n in ns], ls="--", color="C0",
            label=f"this run: tokens/step (its ceiling), {frames} frames")
    ax.plot(ns, [row[n]["realised_speedup"] for n in ns], marker="s", color="C0", alpha=0.6,
            label=f"{device}: tokens/step / (1 + overhead)")
    if "measured_speedup" in row[ns[0]]:
        ax.plot(ns, [row[n]["measured_speedup"] for n in ns], marker="o", color="C0",
                label=f"{device}: measured, whole frames (median of {frames})")
    ov.plot([1] + [n + 1 for n in ns], [1.0] + [1.0 + row[n]["overhead"] for n in ns], marker="o", color="C0",
            label=f"{device} (p50 of {calls} calls)")
    if paper:
        pn = sorted(paper["ceiling"])
        # the paper's points as points: N = 16, 32, 64 are far apart, and a line between them would be an
        # interpolation the paper does not make
        printed = [n for n in pn if ceiling_provenance(n) == "paper"]
        ax.scatter(printed, [paper["ceiling"][n] for n in printed], marker="_", s=200, color="0.45",
                   label="paper: tokens/step (its ceiling)", zorder=3)
        inferred = [n for n in pn if ceiling_provenance(n) == "inferred"]
        if inferred:
            mark(ax.scatter(inferred, [paper["ceiling"][n] for n in inferred], marker="_", s=200, color="0.7",
                            label="inferred from the paper: ceiling (Table 2's tokens/step)", zorder=3), "inferred")
        for i, (name, d) in enumerate(paper["devices"].items(), start=1):
            color = f"C{i}"
            sp = sorted(d["speedup"])
            ax.scatter(sp, [d["speedup"][n] for n in sp], marker="D", color=color, zorder=3,
                       label=f"paper, Figure 4's formula: {PAPER_DEVICES.get(name, name)}")
            for key, marker, label in (("overhead", "D", "paper"), ("derived", "d", "derived from the paper")):
                if d[key]:
                    on = sorted(d[key])
                    sc = ov.scatter([n + 1 for n in on], [1.0 + d[key][n] for n in on], marker=marker, s=40,
                                    color=color, label=f"{label}: {PAPER_DEVICES.get(name, name)}", zorder=3)
                    if key == "derived":
                        mark(sc, "derived")
    ax.axhline(1.0, color="0.5", lw=0.8)
    paper_ns = sorted(paper["ceiling"]) if paper else []
    ticks = sorted(set(ns) | set(paper_ns))
    ax.set(xscale="log", ylabel="speedup over AR (x) / tokens per call",
           title="Speedup vs tree size, each under its own ceiling")
    ax.set_xlabel(tree_size_label(len(readable_ticks(ax, ticks, prefer=paper_ns + powers_of_two(ticks))) < len(ticks)))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ov.set(xscale="log", yscale="log", xlabel="query length q = N + 1 (tokens, log scale)",
           ylabel="1 + overhead (call / AR call, log scale)", title="Verify-call cost vs query length")
    points = np.concatenate([c.get_offsets() for c in ov.collections] + [line.get_xydata() for line in ov.get_lines()])
    qs = sorted({int(q) for q in points[:, 0]})
    prefer = [1] + [n + 1 for n in paper_ns + powers_of_two([q - 1 for q in qs])]       # the paper's q first
    if len(readable_ticks(ov, qs, prefer=prefer)) < len(qs):
        ov.set_xlabel("query length q = N + 1 (tokens, log scale; dotted: unlabelled q)")
    top = float(points[:, 1].max())
    yt = [v for v in (1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32) if v <= 1.1 * top]
    readable_ticks(ov, yt, axis="y", prefer=[1, 2, 4, 8, 16, 32], min_inches=0.25)
    ov.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def loops_sentence(run: dict, paper: dict, who: str, frames: int) -> str:
    """Figure 1's numbers in one sentence: `who`'s tokens/step on `frames` frames, the inner calls per frame and the
    sequential calls per second of audio against AR's, and the paper's (run, paper: `loop_calls`)."""
    spec, ar = run["speculative"], run["ar"]
    return (f"{who} on {frames} frames: {run['tokens_per_step']:.2f} tokens/step, so {spec['inner']:.2f} inner calls "
            f"per frame instead of {ar['inner']:.0f}, {spec['per_second']['total']:.1f} sequential calls per second "
            f"of audio instead of {ar['per_second']['total']:.0f}. The paper: "
            f"{paper['speculative']['per_second']['total']:.1f} at {paper['tokens_per_step']:.2f} tokens/step.")
