"""Notebook 03 (calibrate the tree): the tree's node tokens, the ideal drafter beside the trained ones, the tree's
margin, the try-it tree, and which quantity limits tokens/step, as rows and sentences.

    node_token_rows(tree.paths, drafts)          # one row per node: path, depth, rank, parent, token; raises unless
                                                 # every (depth, rank) slot holds one token
    shared_slots(rows)                           # the rows whose (depth, rank) slot holds several nodes
    top1_rows(curves, covered, depth)            # top-1 acceptance per depth of every drafter and the ideal drafter
    ideal_drafter_sentence(rows, drafters, ideal_frames, frames)   # where a drafter's top-1 exceeds the ideal's
    top1_heading(frames, ideal_frames)           # what the top-1 table (a[d][0], free-running calibration) counts
    acceptance_heading(scores)                   # what the mean-acceptance table (teacher-forced validation) averages
    tables_differ_sentence(rows, scores)         # why the two per-depth tables differ, with this run's numbers
    limiting_quantity(acc)                       # the target's spread or the positional mismatch, and why

Which quantity limits: the own head (H_{t+j} on its own h_{t+j}: no mismatch) accepts a rank-0 draft with the
target's top probability, so 1 - max(own) is what the target's spread costs even without mismatch; the mismatch is
the own head's acceptance minus the best trained drafter's, per depth. The spread limits when the largest mismatch is
below half of 1 - max(own), the mismatch otherwise.
"""

from __future__ import annotations

import torch

from helpers.method.calibration import expected_tokens_per_step, greedy_tree
from helpers.report.acceptance_limits import IDEAL_REFERENCE


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


def top1_heading(frames: int, ideal_frames: int) -> str:
    """The heading of notebook 03's top-1 table (`top1_rows`): what a[d][0] counts, on which frames."""
    return (f"Top-1 acceptance per depth, a[d][0] of the table the tree is built from: how often the drafter's rank-0 "
            f"draft for the code d steps ahead was the code the code predictor then sampled, counted at every start "
            f"position of {frames} free-running calibration frames (whether or not the shallower drafts matched). The "
            f"ideal drafter's column is instead the probability of its draft under the exact marginal of that code (the "
            f"codes in between averaged over the code predictor's own sampling), on {ideal_frames} of those frames.")


def acceptance_heading(scores: dict) -> str:
    """The heading of notebook 03's mean-acceptance table (`Diagnostics.scores`: name -> `DraftScores`, with "own"
    and, where scored, "ideal"): what E[p_target(rank-0 draft)] averages, on which frames."""
    ideal = f"; the ideal drafter only on {scores['ideal'].frames} of them" if "ideal" in scores else ""
    return (f"Mean acceptance E[p_target(rank-0 draft)] per depth: the probability the code predictor's sampler gives "
            f"the rank-0 draft, given the true earlier codes, averaged over every start position of "
            f"{scores['own'].frames} teacher-forced validation frames (the codec's codes){ideal}.")


def tables_differ_sentence(rows: list[dict], scores: dict) -> str:
    """Why the top-1 table (`top1_rows`' rows, free-running calibration) and the mean-acceptance table (`scores`:
    `Diagnostics.scores`, teacher-forced validation) differ: neither is conditional on the parent being accepted;
    they differ in frames and in what is averaged. Says how far the trained drafters' columns are apart and, where
    the ideal drafter was scored, how far its column is, beside the own head on its frames and on all of them."""
    acc = {k: s.by_depth()[0] for k, s in scores.items()}
    trained = [k for k in rows[0] if k in acc and k not in REFERENCES]
    gap = max(abs(r[k] - acc[k][r["depth"] - 1]) for r in rows for k in trained)
    text = ("Neither per-depth table is conditional on the parent being accepted: both count every start position. "
            "They differ in frames and in what they average (above, a match with the code predictor's own sample on "
            "free-running calibration frames; here, the target's probability of the draft given the codec's codes), "
            f"and for the trained drafters they agree within {gap:.3f} at every depth")
    if IDEAL in rows[0] and "ideal" in acc and "own_ideal_frames" in acc:
        ideal = [acc["ideal"][r["depth"] - 1] - r[IDEAL] for r in rows]
        own, sub = acc["own"], acc["own_ideal_frames"]
        text += (f". The ideal drafter's entries here differ from those above by {min(ideal):+.2f} to {max(ideal):+.2f}: "
                 f"it is scored on other "
                 f"frames ({scores['ideal'].frames} validation frames, on which even the own head accepts "
                 f"{min(sub):.2f}-{max(sub):.2f} against {min(own):.2f}-{max(own):.2f} on all "
                 f"{scores['own'].frames}) and given the true intermediate codes instead of averaged over the code "
                 "predictor's own samples")
    return text + "."


def room_sentence(expected: dict[str, dict[int, float]], ideal: dict[int, float], n: int) -> str:
    """How much room the code predictor leaves a drafter at N = n: each drafter's expected tokens/step against the
    ideal drafter's (the exact marginals of the predictor's own sampling, `Calibration.ceiling_expected`)."""
    lines = ", ".join(f"{k} {by_n[n]:.3f} ({by_n[n] - ideal[n]:+.3f})" for k, by_n in expected.items())
    text = (f"At N = {n} the ideal drafter, which drafts the most probable codes of the code predictor's own sampling "
            f"distribution, would expect {ideal[n]:.3f} tokens/step; the drafters expect {lines}.")
    if "reused" in expected:
        text += (f" Its lead over the reused heads, {ideal[n] - expected['reused'][n]:+.3f}, measures the room a "
                 f"drafter reading h_t has here. It is {IDEAL_REFERENCE}: a trained drafter can beat "
                 f"the ideal drafter where its enumeration misses mass, and a drafter that is not greedy per depth "
                 f"could do better still; both stay small while the code predictor's own distribution is as spread "
                 f"out as below.")
    return text + " (The ideal drafter's table has 8 ranks and comes from `ceiling_frames` frames: an estimate.)"


REFERENCES = ("own", "ideal", "own_ideal_frames")    # no trained drafter: never the "best" one


SPREAD_SHARE = 0.5          # the mismatch limits once it reaches this share of what the spread leaves (1 - max(own))


def best_trained(acc: dict[str, list[float]]) -> str:
    """The trained drafter with the largest acceptance summed over depths (`acc` as in `limiting_quantity`; ties:
    the first in `acc`'s order). Raises ValueError where `acc` holds no trained drafter."""
    return max((k for k in acc if k not in REFERENCES), key=lambda k: sum(acc[k]))


def limiting_quantity(acc: dict[str, list[float]]) -> dict:
    """What holds tokens/step down most.

    acc: {name: [D] mean acceptance E[p_target(rank-0 draft)] per depth 1..D} (`DraftScores.by_depth()[0]`), with
    "own" (the no-mismatch own head) and at least one trained drafter; "ideal" / "own_ideal_frames" may be there
    and are ignored.
    -> {"best": `best_trained(acc)`, "mismatch": [D] own - best per depth, "limit": "spread" | "mismatch",
        "why": the limit in words, e.g. "the targets' own spread (the no-mismatch own head accepts only 0.41-0.62)"
        or "the positional mismatch (the own head accepts up to 0.20 more than offsets)"}."""
    own = acc["own"]
    best = best_trained(acc)
    mismatch = [o - b for o, b in zip(own, acc[best])]
    if max(mismatch) < SPREAD_SHARE * (1 - max(own)):
        limit = "spread"
        why = f"the targets' own spread (the no-mismatch own head accepts only {min(own):.2f}-{max(own):.2f})"
    else:
        limit = "mismatch"
        why = f"the positional mismatch (the own head accepts up to {max(mismatch):.2f} more than {best})"
    return {"best": best, "mismatch": mismatch, "limit": limit, "why": why}


def tree_summary(table: torch.Tensor, size: int, max_depth: int | None = None, num_codes: int = 15):
    """The greedy tree of `size` nodes over an acceptance table [K, m] (at most `max_depth` deep): a sentence
    (nodes per depth, ranks per depth, expected tokens/step) and the tree (a `SparseTree`, for drawing). A size the
    depth cannot hold (at most width + width^2 + ... nodes, the table's ranks per depth) is refused with what it
    holds, in one line (the try-it controls show it in place of the tree)."""
    depth = max_depth or table.shape[0]
    holds = sum(table.shape[1] ** d for d in range(1, depth + 1)) if 1 <= depth <= table.shape[0] else None
    if holds is not None and size > holds:
        raise ValueError(f"N = {size} nodes do not fit in a tree at most {depth} deep over {table.shape[1]} ranks per "
                         f"depth (it holds {holds}): lower N or raise max_depth")
    tree = greedy_tree(table, size, max_depth)
    text = (f"N = {size}, depth at most {max_depth or table.shape[0]}: depth {tree.max_depth}, nodes per depth "
            + " / ".join(map(str, tree.nodes_per_depth)) + ", ranks per depth " + " / ".join(map(str, tree.width))
            + f"; expected tokens/step {expected_tokens_per_step(tree, table, num_codes):.3f}.")
    return text, tree


def show_tree(tables: dict[str, torch.Tensor], drafter: str, size: int, max_depth: int) -> None:
    """Notebook 03's try-it cell: the greedy tree of `drafter`'s acceptance table (`tables`: name -> [K, m]) with
    `size` nodes at most `max_depth` deep, its sentence (`tree_summary`) and its drawing, displayed."""
    from IPython.display import Markdown, display

    from helpers.report.decoding_figures import tree_drawing
    from helpers.report.plots import plt
    if drafter not in tables:
        raise ValueError(f"unknown drafter {drafter!r}; the tables hold {', '.join(sorted(tables))}")
    text, tree = tree_summary(tables[drafter], int(size), int(max_depth))
    display(Markdown(f"**{drafter}**, " + text))
    fig = tree_drawing(tree, f"{drafter}: greedy tree, N = {int(size)}, depth at most {int(max_depth)}")
    display(fig)
    plt.close(fig)
    display(Markdown("*Figure (try it).* The tree for the values above (labels: draft rank r)."))


def example_round_md(record, frame: int, index: int, frames: int) -> str:
    """One real round of Figure 2 in words (`helpers.measure.walkthrough.example_round`'s frame, round index and
    `RoundRecord`; frames: how many frames were searched for a round with an accepted draft)."""
    return (f"Frame {frame}, round {index + 1}: root `c{record.t}` at RoPE position {record.positions[0]} behind "
            f"{record.cache_length} cache slots; query of {len(record.tokens)} tokens {record.tokens}; accepted path "
            f"(query indices) {record.accepted_path}, {record.accepted} draft(s) accepted, committed codes "
            f"{record.committed}. The first round in frame order with an accepted draft among {frames} frames "
            "(or frame 0's first round if none).")


def margin_md(drafter: str, size: int, tree, table, margin: dict) -> str:
    """Why the greedy tree of `size` nodes has its shape, from `helpers.method.calibration.tree_margin`'s `margin`:
    its weakest node against the best node left out and the best node one level deeper (table: the acceptance
    table [K, m] the tree was built from)."""
    (weakest, p_weak), (out_path, p_out) = margin["weakest"], margin["best_left_out"]
    text = (f"The {drafter} tree for N = {size} has depth {tree.max_depth} ("
            + ", ".join(f"{n} node{'s' * (n != 1)} at depth {d}" for d, n in enumerate(margin["per_depth"], start=1))
            + f"). Its weakest node {weakest} has path product {p_weak:.4f}; the best node left out, {out_path} at "
            f"depth {len(out_path)}, has {p_out:.4f}")
    if margin["best_deeper"]:
        deeper, p_deep = margin["best_deeper"]
        text += (f", and the best node one level deeper, {deeper}, only {p_deep:.4f}: a[{len(deeper)}][{deeper[-1]}] "
                 f"= {float(table[len(deeper) - 1, deeper[-1]]):.3f} times its parent's path product. Deeper nodes "
                 "pay a factor a[d][r] < 1 per level, so the tree widens until a deeper node beats the next sibling")
    else:
        text += f"; the tree already reaches the drafter's depth K = {table.shape[0]}"
    return text + "."


def limits_md(diag, acc: dict[str, list[float]], limit: dict) -> str:
    """What holds tokens/step down, in words: the target's entropy and top probability per code position, the own
    head's and the best trained drafter's acceptance per depth, the limit (`limiting_quantity`'s dict) and the
    codebooks' usage (`diag`: `helpers.method.diagnostics.Diagnostics`)."""
    target, u, best = diag.target, diag.usage, limit["best"]
    entropy, top = target.entropy.tolist(), target.top_prob.tolist()
    usage = (u.entropy_bits / u.max_bits)
    return (f"Target entropy per code position {min(entropy):.2f}-{max(entropy):.2f} nats, top probability "
            f"{min(top):.2f}-{max(top):.2f}. Even without mismatch (own head) a rank-0 draft is accepted with "
            "probability " + ", ".join(f"{o:.2f}" for o in acc["own"]) + f" at depths 1..{diag.depth}; the best "
            f"trained drafter, {best}, " + ", ".join(f"{b:.2f}" for b in acc[best])
            + f". What holds tokens/step down most here: {limit['why']}. Codebooks use "
            f"{float(usage.min()):.0%}-{float(usage.max()):.0%} of their capacity in bits; the most frequent code "
            f"takes {float(u.top_share.min()):.1%}-{float(u.top_share.max()):.1%} of the frames.")
