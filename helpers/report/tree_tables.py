"""Notebook 03's tables about the tree and the ideal drafter, as rows and sentences.

    node_token_rows(tree.paths, drafts)          # one row per node: path, depth, rank, parent, token; raises unless
                                                 # every (depth, rank) slot holds one token
    shared_slots(rows)                           # the rows whose (depth, rank) slot holds several nodes
    top1_rows(curves, covered, depth)            # top-1 acceptance per depth of every drafter and the ideal drafter
    ideal_drafter_sentence(rows, drafters, ideal_frames, frames)   # where a drafter's top-1 exceeds the ideal's
"""

from __future__ import annotations

import torch

IDEAL = "ideal drafter"


def node_token_rows(paths, drafts: torch.Tensor) -> list[dict]:
    """One row per node of a tree (`paths`: rank tuples, root excluded) with the token it carries in a round whose
    drafts are `drafts` [D, m] (depth d, rank r -> drafts[d - 1, r]). Raises if two nodes of one (depth, rank) slot
    carried different tokens (a node's token depends only on its depth and rank)."""
    rows = [{"node": i, "path (ranks)": str(p), "depth": len(p), "rank": p[-1],
             "parent": str(p[:-1]) if len(p) > 1 else "root", "token": int(drafts[len(p) - 1, p[-1]])}
            for i, p in enumerate(paths, start=1)]
    tokens = {}
    for r in rows:
        if tokens.setdefault((r["depth"], r["rank"]), r["token"]) != r["token"]:
            raise AssertionError(f"slot (depth {r['depth']}, rank {r['rank']}) carries two tokens")
    return rows


def shared_slots(rows: list[dict]) -> list[dict]:
    """The rows of `node_token_rows` whose (depth, rank) slot also holds another node, in row order."""
    count = {}
    for r in rows:
        count[(r["depth"], r["rank"])] = count.get((r["depth"], r["rank"]), 0) + 1
    return [r for r in rows if count[(r["depth"], r["rank"])] > 1]


def top1_rows(curves: dict[str, list[list[float]]], covered: list[float], depth: int) -> list[dict]:
    """Per depth 1..depth, each curve's top-1 acceptance (curves: name -> [depth][rank] acceptance, the ideal
    drafter's under IDEAL) and the mass the ideal drafter's enumeration covered there."""
    return [{"depth": j + 1, **{k: a[j][0] for k, a in curves.items()}, "mass covered": covered[j]}
            for j in range(depth)]


def ideal_drafter_sentence(rows: list[dict], drafters, ideal_frames: int, frames: int) -> str:
    """Where a drafter's top-1 acceptance exceeds the ideal drafter's (rows of `top1_rows`), with the mass its
    enumeration covered there; both are estimates on different frame counts, said."""
    beats = [(r["depth"], k, r[k], r[IDEAL], r["mass covered"]) for r in rows for k in drafters if r[k] > r[IDEAL]]
    said = ("; ".join(f"at depth {j} {k} exceeds the ideal drafter's top-1 ({x:.3f} vs {y:.3f}, its enumeration "
                      f"covering {c:.2f} of the mass)" for j, k, x, y, c in beats)
            if beats else "no trained drafter exceeds the ideal drafter's top-1 at any depth")
    return (f"In this run {said} ({ideal_frames} ideal-drafter frames against {frames} for the drafters: both are "
            "estimates).")
