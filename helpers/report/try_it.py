"""The "try it yourself" cells of notebooks 00 and 03: change a parameter, see the round or the tree change.

    toy_round_rows(tree=((0,), (1,), (0, 0)), depth=2, temperature=1.0, seed=0)   # 00: the toy frame, round by round
    tree_summary(table, size=32, max_depth=3)                                     # 03: the greedy tree of a drafter

Each returns what the notebook shows (Markdown, and a tree to draw), so that the same call serves the runner (the cell
runs once with its plain values) and JupyterLab (controls through ipywidgets, each change re-runs the call:
`helpers.experiment.controls.show`).
"""

from __future__ import annotations

import torch

from helpers.method.calibration import expected_tokens_per_step, greedy_tree
from helpers.method.round import SamplerConfig
from helpers.report import walkthrough as toy
from helpers.report.tables import markdown


def parse_tree(text: str) -> tuple[tuple[int, ...], ...]:
    """"0; 1; 0,0" -> ((0,), (1,), (0, 0)): paths of draft ranks, one per node, separated by ';'."""
    try:
        paths = tuple(tuple(int(r) for r in p.split(",")) for p in text.split(";") if p.strip())
    except ValueError:
        raise ValueError(f"a tree is paths of ranks like '0; 1; 0,0' (';' between nodes), not {text!r}") from None
    if not paths or any(not p or min(p) < 0 for p in paths) or any(p[:-1] and p[:-1] not in paths for p in paths):
        raise ValueError(f"every node's parent must be in the tree and ranks must be >= 0: {text!r}")
    return paths


def toy_round_rows(tree, depth: int = 2, temperature: float = 1.0, seed: int = 0) -> str:
    """The toy frame of notebook 00 decoded with `tree` (paths of ranks, or the text `parse_tree` reads), `depth`
    drafts per round and the sampler at `temperature`: one row per round (root, drafts, accepted, committed codes),
    then the calls against AR's and whether the codes are AR's (they always are: the walkthrough raises if not)."""
    paths = parse_tree(tree) if isinstance(tree, str) else tuple(tuple(p) for p in tree)
    if max(len(p) for p in paths) > depth:
        raise ValueError(f"the tree reaches depth {max(len(p) for p in paths)}, deeper than K = {depth} drafts")
    dec = toy.toy_decoder(seed=seed, depth=depth, tree=paths, sampler=SamplerConfig(temperature=temperature))
    g, c0, u = toy.toy_frame(seed=seed)
    walk = toy.toy_walkthrough(dec, g, c0, u)
    rows = [{"round": r, "root": f"c{rnd['t']}", "drafts (per depth, by rank)": rnd["drafts"] or "none (last code)",
             "accepted drafts": rnd["accepted"], "committed": ", ".join(f"{k}={v}" for k, v in rnd["emitted"].items())}
            for r, rnd in enumerate(walk["rounds"], 1)]
    n = dec.predictor.num_codes
    return (f"Tree {list(paths)}, K = {depth}, temperature {temperature}, seed {seed}: the prefill and "
            f"{len(walk['rounds'])} rounds, {1 + len(walk['rounds'])} calls where AR makes {n}; codes "
            f"{walk['codes']} {'equal' if walk['codes'] == walk['ar_codes'] else 'DIFFER FROM'} AR's "
            f"{walk['ar_codes']}.\n\n" + markdown(rows))


def tree_summary(table: torch.Tensor, size: int, max_depth: int | None = None, num_codes: int = 15):
    """The greedy tree of `size` nodes over an acceptance table [K, m] (at most `max_depth` deep): a sentence
    (nodes per depth, ranks per depth, expected tokens/step) and the tree (a `SparseTree`, for drawing)."""
    tree = greedy_tree(table, size, max_depth)
    text = (f"N = {size}, depth at most {max_depth or table.shape[0]}: depth {tree.max_depth}, nodes per depth "
            + " / ".join(map(str, tree.nodes_per_depth)) + ", ranks per depth " + " / ".join(map(str, tree.width))
            + f"; expected tokens/step {expected_tokens_per_step(tree, table, num_codes):.3f}.")
    return text, tree


def show_toy_round(tree, depth: int = 2, temperature: float = 1.0, seed: int = 0) -> None:
    """Notebook 00's try-it cell: display `toy_round_rows` (what `helpers.experiment.controls.show` re-renders)."""
    from IPython.display import Markdown, display
    display(Markdown(toy_round_rows(tree, int(depth), temperature, int(seed))))


def show_tree(tables: dict[str, torch.Tensor], drafter: str, size: int, max_depth: int) -> None:
    """Notebook 03's try-it cell: the greedy tree of `drafter`'s acceptance table (`tables`: name -> [K, m]) with
    `size` nodes at most `max_depth` deep, its sentence (`tree_summary`) and its drawing, displayed."""
    from IPython.display import Markdown, display

    from helpers.report.plots import plt, tree_drawing
    if drafter not in tables:
        raise ValueError(f"unknown drafter {drafter!r}; the tables hold {', '.join(sorted(tables))}")
    text, tree = tree_summary(tables[drafter], int(size), int(max_depth))
    display(Markdown(f"**{drafter}**, " + text))
    fig = tree_drawing(tree, f"{drafter}: greedy tree, N = {int(size)}, depth at most {int(max_depth)}")
    display(fig)
    plt.close(fig)
    display(Markdown("*Figure (try it).* The tree for the values above (labels: draft rank r)."))
