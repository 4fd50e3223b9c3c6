"""What one speculative round of a decoded frame looked like: its query, mask, positions and accepted path.

`round_records(decoder, result)` rebuilds every tree round of a `FrameResult` from what the decoder recorded (the
drafts of each round, the committed codes) and the decoder's own rounds: the query tokens are the round's
candidates packed behind the root (`pack_query`), the mask and the RoPE positions are the verify call's own buffers
(`FusedStep.visible[t]`, `FusedStep.position[t]`), and the accepted path is the round's own walk (`accept`) over the
committed codes. It raises if the walk does not reproduce the committed codes, so a record is the round that ran.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.method.decoding import Decoder, FrameResult
from helpers.method.round import accept, pack_query


@dataclass
class RoundRecord:
    """One tree round, root at code position t (the root token is c_t; query index 0).

    tokens [q] (root then nodes, sorted by depth), paths (query index -> rank path, root ()), depth [q],
    positions [q] (RoPE position ids: t + 1 + depth), visible [q, S + q] bool (the call's mask: S cache slots,
    slot 0 = g, slot 1 = c0, slot j = c_{j-1}, of which the first `cache_length` = t + 1 are filled, then the
    query), drafts [D, m] (candidates per drafted position c_{t+1+d}, by rank), accepted_path (query indices
    root .. stop node), committed (codes this round commits: the accepted drafts, then the stop node's draw).
    """

    t: int
    tokens: list[int]
    paths: list[tuple[int, ...]]
    depth: list[int]
    positions: list[int]
    visible: torch.Tensor
    cache_length: int
    drafts: list[list[int]]
    accepted_path: list[int]
    committed: list[int]

    @property
    def accepted(self) -> int:
        """Drafts accepted in this round (committed codes - 1)."""
        return len(self.accepted_path) - 1


def round_records(decoder: Decoder, result: FrameResult) -> list[RoundRecord]:
    """Every tree round of `result` (a frame `decoder.decode_frame` returned, batch 1, eager), in order."""
    codes = result.codes[0].tolist()                       # c1..c15
    records = []
    for i, (t, cand) in enumerate(result.drafts):
        ix = decoder.index(t)                              # the nodes this round could accept: a prefix of the tree's
        cand = cand.to(ix.node_depth.device)
        tokens = pack_query(ix, torch.tensor([codes[t - 1]], device=cand.device), cand[None])[0].tolist()
        committed = codes[t:t + result.accepted[i] + 1]
        depth = ix.tree.depth_list
        ys = [committed[d] if d < len(committed) else -1 for d in depth]   # each node's draw, where it is known
        stop = accept(torch.tensor([tokens], device=ix.depth.device), torch.tensor([ys], device=ix.depth.device), ix)
        path = ix.paths[int(stop)][:depth[int(stop)] + 1].tolist()
        taken = [ys[j] for j in path]
        if taken != committed:
            raise AssertionError(f"round {i} (t={t}): the walk over the recorded codes commits {taken}, "
                                 f"the decoder committed {committed}")
        step, q = decoder.modules.verify, ix.q             # the whole tree's verify call: its first q tokens
        records.append(RoundRecord(
            t=t, tokens=tokens, paths=[()] + list(ix.tree.paths), depth=depth,
            positions=step.position[t, :q].tolist(), visible=step.visible[t, :q, :step.core.slots + q],
            cache_length=t + 1,
            drafts=cand.tolist(), accepted_path=path, committed=committed))
    return records
