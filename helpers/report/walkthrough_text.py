"""Notebook 00's toy walkthrough told round by round, and the descent check at every node with children, as text
and rows (`helpers.report.walkthrough.toy_walkthrough`'s dict in, what the cells display out).

    head, rows, walk_text = round_text(walk["rounds"][0], 1)     # a round's heading, node rows, walk and commit
    check = descent_rows(walk, draws=20000, seed=0)               # {"rows", "residuals", "worst"} (raises on a miss)
"""

from __future__ import annotations

from helpers.report import walkthrough as toy
from helpers.report.tables import markdown

NODE_COLUMNS = ("index", "path", "fed", "token", "predicts", "p", "cdf", "u column", "u", "draw", "on path")
MAX_Z = 4.0                       # the empirical frequencies must lie within this many binomial standard errors


def round_text(rnd: dict, number: int) -> tuple[str, list[dict], str]:
    """Round `number` (from 1) of a walkthrough: its heading (root, cache slot, drafts or "no tree"), its node rows
    (NODE_COLUMNS) and its walk (each step's draw and descent, the accepted drafts, the codes and KV entries kept)."""
    t = rnd["t"]
    head = f"**Round {number}**: root c{t} = {rnd['nodes'][0]['token']} at cache slot {rnd['cache length']}. "
    if rnd["drafts"] is None:
        head += f"No tree: c{t + 1} is the frame's last code, so this is one plain (AR) call."
    else:
        head += ("Drafts (row = drafted position, column = rank): "
                 + "; ".join(f"c{t + 1 + d}: {row}" for d, row in enumerate(rnd["drafts"]))
                 + f". The query is the root and {len(rnd['nodes']) - 1} nodes, one call.")
    rows = [{k: nd[k] for k in NODE_COLUMNS} for nd in rnd["nodes"]]
    steps = [f"at {rnd['nodes'][s['at']]['path']} the draw is {s['sample']}; children carry "
             f"{s['children tokens'] or 'nothing'}"
             + (f" -> descend to query index {s['descend to']}" if s["descend to"] != "stop" else " -> stop")
             for s in rnd["walk"]]
    emitted = ", ".join(f"{k}={v}" for k, v in rnd["emitted"].items())
    text = "Walk: " + "; ".join(steps) + f". Accepted drafts: {rnd['accepted']}; committed codes: {emitted}."
    if "committed" in rnd:
        text += (" KV entries kept: " + ", ".join(f"{k} <- {v}" for k, v in rnd["committed"].items())
                 + f". Next round's drafts: {rnd['next drafts from']}.")
    return head, rows, text


def descent_rows(walk: dict, draws: int = 20000, seed: int = 0, round_index: int = 0) -> dict:
    """At every node with children of one round: the descent probability in closed form, by the SpecInfer recursion
    and over `draws` uniforms, and the residual on a miss (`toy.acceptance_check`). Raises unless every node passes
    (within MAX_Z standard errors, closed form equal to the recursion).
    -> {"rows": [...], "residuals": [...], "worst": the largest |empirical - exact| / SE}."""
    rows, residuals, worst = [], [], 0.0
    nodes = walk["rounds"][round_index]["nodes"]
    for i, p, children in toy.node_targets(walk, round_index):
        a = toy.acceptance_check(p, children, draws=draws, seed=seed)
        if not (a["ok"] and a["closed form equal"]):
            raise AssertionError(f"the descent at node {nodes[i]['path']} does not hold: {a}")
        z = abs(a["empirical"] - a["exact"]) / a["se"] if a["se"] > 0 else 0.0
        worst = max(worst, z)
        rows.append({"node": nodes[i]["path"], "children tokens": children, "sum p over children": a["exact"],
                     "SpecInfer accept": a["specinfer"], f"empirical ({draws:,})": a["empirical"],
                     "binomial SE": a["se"], "diff / SE": z})
        residuals.append({"node": nodes[i]["path"], "p restricted, renormalised": a["residual"],
                          "SpecInfer residual": a["specinfer residual"],
                          "empirical given a miss": a["empirical residual"], "misses": a["misses"]})
    return {"rows": rows, "residuals": residuals, "worst": worst}


def rows_markdown(rows: list[dict], digits: int = 3) -> str:
    """A Markdown table of `rows` with every float written with `digits` decimals (`toy.rounded`)."""
    return markdown(toy.rounded(rows, digits))
