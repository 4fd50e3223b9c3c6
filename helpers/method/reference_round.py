"""The readable reference round: one frame of a speculative `Decoder.decode_frame` recomputed round by round with plain
`CodePredictor` calls over each round's tree query, every node's target p, CDF and draw kept (notebook 00 prints
them; tests/test_walkthrough.py checks them against the decoder).

`reference_frame` uses the decoder's own trees (`Decoder.index`, and their walk `helpers.method.round.accept`) and
raises unless its codes, accepted counts and drafts equal the decoder's and its codes equal the AR decoder's. It
recomputes on purpose: a reader sees each node's full target, which the decoder's fused call never materialises on
the host (it samples every node at once), and a second, readable stack reaching the decoder's codes is a proof, not
a replay of the decoder's own numbers. The walk itself is not written again: it is the round's.

`specinfer_deterministic` and `acceptance_check` are the numbers behind the losslessness argument: the walk's descent
at a node equals SpecInfer's multi-candidate acceptance, in closed form and over drawn uniforms. Everything is
returned as plain lists and dicts.
"""

from __future__ import annotations

import math

import torch

from helpers.method.decoding import Decoder
from helpers.method.drafters import top_candidates
from helpers.method.sampler import frame_uniforms, sample, target_probs
from helpers.method.round import accept, pack_query


def _draw(p: torch.Tensor, u: float, drawn: int) -> dict:
    """One inverse-CDF draw, for printing: p [V], its CDF, u, and the sampler's token with its CDF interval."""
    cdf = p.cumsum(-1).tolist()
    return {"p": p.tolist(), "cdf": cdf, "u": u, "draw": drawn,
            "interval": [cdf[drawn - 1] if drawn else 0.0, cdf[drawn]]}


@torch.no_grad()
def reference_frame(decoder: Decoder, g: torch.Tensor, c0: torch.Tensor, u: torch.Tensor) -> dict:
    """Every round of one frame, recomputed with `CodePredictor` calls. g [1, H], c0 [1], u [1, n].

    Returns {"u", "c1", "rounds", "codes", "ar_codes", "accepted"}; each round: t, cache length, drafts [D][m],
    nodes (query index, path, code position, token, uniform column, draw), walk, accepted, committed codes and
    cache slots, and where the next drafts come from. Raises if any of it differs from the decoder's.
    """
    p, drafter, sampler, n = decoder.predictor, decoder.drafter, decoder.sampler, decoder.predictor.num_codes
    uu = u[0].tolist()
    cache = p.new_cache(1)
    pre = drafter.prenorm                              # a prenorm drafter drafts from r (before the final norm)
    h = p.prefill(cache, g, c0, prenorm=pre)                                  # h_1 [1, H] (r_1)
    p1 = target_probs(p.logits((p.final_norm(h) if pre else h)[:, None], [1])[0, 0], sampler)
    root = int(sample(p1, u[0, 0]))
    out = {"u": uu, "c1": _draw(p1, uu[0], root), "rounds": []}
    codes, accepted, drafts, t = [root], [], [], 1
    while t < n:
        ix = decoder.index(t)                               # the tree this round may accept from; None at c14
        if ix is None:
            cand, tokens, depth, mask = None, [root], [0], torch.ones(1, 1, dtype=torch.bool, device=p.device)
        else:
            cand = top_candidates(drafter, h, t, ix.depth_max, ix.width)[0]                       # [D, m]
            drafts.append((t, cand.tolist()))
            tokens = pack_query(ix, torch.tensor([root], device=cand.device), cand[None])[0].tolist()
            depth, mask = ix.tree.depth_list, ix.tree.mask
        children = ([sorted(c.values()) for c in ix.tree.children] if ix is not None else [[]])
        out_pos = [t + d + 1 for d in depth]
        query = torch.tensor([tokens], device=p.device)
        x = p.embed(query, [t + d for d in depth])
        hidden, k, v = p.forward_query(cache, x, mask, torch.tensor(depth, device=p.device), prenorm=pre)
        probs = target_probs(p.logits(p.final_norm(hidden) if pre else hidden, out_pos)[0], sampler)   # [q, V]
        cols = [t + d for d in depth]                                                 # the uniform of c_{t+d+1}
        ys = sample(probs, u[0, cols].to(probs.device)).tolist()
        if ix is None:
            node, path = 0, [0]
        else:                                                                          # the round's own walk
            node = int(accept(query, torch.tensor([ys], device=p.device), ix))
            path = ix.paths[node][:depth[node] + 1].tolist()
        taken = [ys[i] for i in path]
        nodes = [{"index": i, "path": "root" if i == 0 else str(ix.tree.paths[i - 1]), "fed": f"c{t + depth[i]}",
                  "token": tokens[i], "predicts": f"c{out_pos[i]}", "u column": f"u{cols[i] + 1}",
                  "children": children[i], "on path": i in path, **_draw(probs[i], uu[cols[i]], ys[i])}
                 for i in range(len(tokens))]
        walk = []
        for i in path:
            kids = {tokens[c]: c for c in children[i]}
            if len(kids) != len(children[i]):
                raise RuntimeError(f"siblings under query index {i} carry equal tokens: {tokens}")
            walk.append({"at": i, "sample": ys[i], "children tokens": sorted(kids),
                         "descend to": kids.get(ys[i], "stop")})
        rnd = {"t": t, "cache length": cache.length, "drafts": None if cand is None else cand.tolist(),
               "nodes": nodes, "walk": walk, "accepted": len(taken) - 1,
               "emitted": {f"c{t + 1 + j}": c for j, c in enumerate(taken)}}
        codes += taken
        accepted.append(len(taken) - 1)
        t = out_pos[node]
        if t < n:
            index = torch.tensor(path, device=p.device)
            cache.commit(k.index_select(3, index), v.index_select(3, index))
            rnd["committed"] = {f"slot {rnd['cache length'] + j}": f"c{rnd['t'] + j}={tokens[i]}"
                                for j, i in enumerate(path)}
            root, h = ys[node], hidden[:, node]
            rnd["next drafts from"] = (f"h_{t} at query index {node} (path {nodes[node]['path']})"
                                       if decoder.index(t) is not None else
                                       f"none: c{t + 1} is the frame's last code, one plain call")
        out["rounds"].append(rnd)
    spec = decoder.decode_frame(g, c0, u)
    ar = Decoder(p, sampler).decode_frame(g, c0, u).codes[0].tolist()
    if spec.codes[0].tolist() != codes or spec.accepted != accepted or ar != codes:
        raise RuntimeError(f"walkthrough {codes} / accepted {accepted} differs from the decoder "
                           f"{spec.codes[0].tolist()} / {spec.accepted} or AR {ar}")
    if [(s, c.tolist()) for s, c in spec.drafts] != drafts:
        raise RuntimeError(f"walkthrough drafts {drafts} differ from the decoder's {spec.drafts}")
    out.update(codes=codes, ar_codes=ar, accepted=accepted)
    return out


def specinfer_deterministic(p: list[float], candidates: list[int]) -> dict:
    """Multi-candidate speculative sampling (SpecInfer / Sequoia) with point-mass drafts, in closed form.

    Candidate x_i is accepted with probability min(1, r(x_i) / 1) = r(x_i) under the current residual r (start:
    r = p); on rejection r becomes norm(max(0, r - delta(x_i))), i.e. r with x_i zeroed and renormalised.
    Returns the probability that each candidate is the accepted one and the residual after all rejections.
    """
    r, miss, accept = list(p), 1.0, []
    for x in candidates:
        accept.append(miss * r[x])
        miss *= 1.0 - r[x]
        rest = 1.0 - r[x]
        r = [0.0 if v == x else r[v] / rest for v in range(len(r))]
    return {"accept": accept, "residual": r}


def acceptance_check(p: torch.Tensor, children: list[int], draws: int = 20000, seed: int = 0) -> dict:
    """The walk's descent from a node whose target is p [V] and whose children carry tokens `children`.

    Closed form: P(descend) = sum of p over the children's tokens; the token given a miss is p restricted to the
    other tokens, renormalised; both equal `specinfer_deterministic`. Empirical: `draws` inverse-CDF draws with
    uniforms from `frame_uniforms`, compared within 4 binomial standard errors (`ok`).
    """
    vocab = p.shape[-1]
    pl = p.tolist()
    exact = sum(pl[c] for c in children)
    others = [v for v in range(vocab) if v not in children]
    residual = [0.0 if v in children else pl[v] / (1.0 - exact) for v in range(vocab)]
    spec = specinfer_deterministic(pl, children)
    u = frame_uniforms(torch.Generator().manual_seed(seed), 1, batch=draws, device=p.device)[:, 0]
    y = sample(p.expand(draws, vocab), u)
    hit = torch.isin(y, torch.tensor(children, device=y.device))
    freq = float(hit.double().mean())
    se = math.sqrt(exact * (1 - exact) / draws)
    missed = int((~hit).sum())
    counts = torch.bincount(y[~hit], minlength=vocab).tolist()
    emp_res = [c / max(missed, 1) for c in counts]
    res_se = [math.sqrt(r * (1 - r) / max(missed, 1)) for r in residual]
    return {"children tokens": children, "exact": exact, "specinfer": sum(spec["accept"]),
            "specinfer residual": spec["residual"], "empirical": freq, "se": se, "draws": draws,
            "residual": residual, "empirical residual": emp_res, "residual se": res_se, "misses": missed,
            "others": others,
            "ok": abs(freq - exact) <= 4 * se + 1e-12
            and all(abs(e - r) <= 4 * s + 1e-12 for e, r, s in zip(emp_res, residual, res_se)),
            "closed form equal": abs(sum(spec["accept"]) - exact) < 1e-12
            and all(abs(a - b) < 1e-12 for a, b in zip(spec["residual"], residual))}


def node_targets(walk: dict, round_index: int = 0) -> list[tuple[int, torch.Tensor, list[int]]]:
    """The nodes of a walkthrough round that have children: (query index, target p [V], children's tokens).
    The walkthrough's numbers are host lists; p is rebuilt on the CPU."""
    nodes = walk["rounds"][round_index]["nodes"]
    return [(nd["index"], torch.tensor(nd["p"], dtype=torch.float64, device="cpu"),
             [nodes[c]["token"] for c in nd["children"]]) for nd in nodes if nd["children"]]
