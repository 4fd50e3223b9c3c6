"""How speculative decoding runs, drawn: the draft tree and its attention mask, and the paper's Figures 1-3 from a
run's own numbers and rounds. Each function returns a Figure (`helpers.report.plots.save` writes it).

- `tree_drawing` / `attention_mask`: a calibrated tree (`helpers.method.tree.SparseTree`), and the mask its verify
  call uses (`SparseTree.mask`, [q, q] bool: a node sees the root, its ancestors and itself).
- `nested_loops` (Figure 1): the talker's outer loop (one call per 80 ms frame) around the code predictor's inner
  loop (15 codes), and the sequential calls per frame and per second, AR and speculative
  (`helpers.measure.walkthrough.loop_calls`); `loops_sentence` says its numbers.
- `tree_packing` (Figure 2): one real round (`helpers.method.round_records.RoundRecord`): the tree with its tokens, the
  packed query, the call's mask with the cache columns, the RoPE position ids, the accepted path highlighted.
- `one_call` (Figure 3): the AR path and the speculative path inside one call, with the offset block, drawn from
  the run's K and hidden size and the accepted code and drafts of one real round.
"""

from __future__ import annotations

import numpy as np
import seaborn as sns
from matplotlib.colors import ListedColormap
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from helpers.method.round_records import RoundRecord
from helpers.method.tree import SparseTree
from helpers.report.plots import plt


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


PATH_COLOR, DRAFT_COLOR, CACHE_COLOR, AR_COLOR = "#2ca02c", "#1f77b4", "0.72", "#2ca02c"


SHOWN = 6                                  # drafts per depth drawn in Figure 3


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


def loops_sentence(run: dict, paper: dict, who: str, frames: int) -> str:
    """Figure 1's numbers in one sentence: `who`'s tokens/step on `frames` frames, the inner calls per frame and the
    sequential calls per second of audio against AR's, and the paper's (run, paper: `loop_calls`)."""
    spec, ar = run["speculative"], run["ar"]
    return (f"{who} on {frames} frames: {run['tokens_per_step']:.2f} tokens/step, so {spec['inner']:.2f} inner calls "
            f"per frame instead of {ar['inner']:.0f}, {spec['per_second']['total']:.1f} sequential calls per second "
            f"of audio instead of {ar['per_second']['total']:.0f}. The paper: "
            f"{paper['speculative']['per_second']['total']:.1f} at {paper['tokens_per_step']:.2f} tokens/step.")


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
