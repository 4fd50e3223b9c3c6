"""What caps acceptance, in report.md's words: the target's sharpness, the ideal drafter (`IDEAL_REFERENCE`, said
the same wherever it is named: notebook 03, report.md) and where the positional mismatch is (metrics' `target`,
`ceiling` and `diagnostics`).
"""

from __future__ import annotations

from statistics import mean


IDEAL_REFERENCE = ("a reference point: what a drafter of the model's own most probable codes would expect in the same "
                   "tree, not an upper bound on a real drafter")     # the ideal drafter, said the same everywhere


REFERENCE_SCORES = ("ideal", "own_ideal_frames")   # scored on a few frames only: not beside the others


def limit_lines(m: dict) -> list[str]:
    """What caps acceptance here: the target's sharpness and the exact-marginal drafter's top-1."""
    lines, target, ceiling = [], m.get("target", {}), m.get("ceiling", {})
    if target.get("top_prob"):
        lines.append(f"- **Why the numbers differ: the target.** A draft is accepted when it equals the code the "
                     f"target samples; the target's most probable code carries on average "
                     f"{mean(target['top_prob']):.2f} of its probability (entropy {mean(target['entropy']):.2f} nats "
                     f"per code position, top-k {m.get('run', {}).get('params', {}).get('top_k')}), so a single draft "
                     "(accepted with the target's probability of it) is accepted at most that often.")
    if ceiling.get("top1"):
        lines.append("- The exact-marginal (ideal) drafter's rank-0 draft is accepted with probability "
                     + ", ".join(f"{a:.2f}" for a in ceiling["top1"]) + f" at depths 1..{len(ceiling['top1'])} (its "
                     "marginal is enumerated and covers " + ", ".join(f"{c:.0%}" for c in ceiling.get("covered", []))
                     + f" of the mass): {IDEAL_REFERENCE}.")
    return lines


def mismatch_lines(m: dict) -> list[str]:
    """The mismatch on teacher-forced validation frames (metrics' `diagnostics`): depth-1 acceptance of the own
    head, the reused heads and each trained drafter, and whether the displacement h_{t+j} - h_t is a translation."""
    diag = m.get("diagnostics", {})
    drafts = diag.get("drafts", {})
    if "own" not in drafts or "reused" not in drafts:
        return []
    order = ["own", "reused"] + sorted(k for k in drafts if k not in ("own", "reused", *REFERENCE_SCORES))
    acc = {k: drafts[k]["acceptance_by_depth"][0] for k in order}
    named = ", ".join(f"{k} {a:.3f}" for k, a in acc.items())
    lines = [f"- **Where the mismatch is** (teacher-forced validation, depth-1 acceptance E[p_target(draft)]): {named}. "
             f"The own head reading its own state is the no-mismatch reference; the reused heads lose "
             f"{acc['own'] - acc['reused']:.3f} to it."]
    tr = diag.get("translation", {})
    if tr:
        shares = "; ".join(f"{k}: " + ", ".join(f"{x:.1%}" for x in v["shared_share"]) for k, v in tr.items())
        lines.append(f"- One shared vector per depth explains this share of the displacement h_(t+j) - h_t "
                     f"(depths 1..{len(next(iter(tr.values()))['shared_share'])}): {shares}. Offsets are such "
                     "shared vectors: they can close the mismatch only as far as it is a translation (after the norm "
                     "an offset is a logit bias; before it, a move of the normed direction).")
    drift = diag.get("tiny_drift", {}).get("loss_gap_closed")
    if isinstance(drift, dict):
        lines.append("- On a controlled tiny model whose drift is known (a translation before the norm, notebook 02) "
                     "the offsets close this share of the own-vs-reused draft cross-entropy gap: "
                     + ", ".join(f"{k} {v:.0%}" for k, v in drift.items()) + ".")
    return lines
