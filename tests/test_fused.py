"""The fused verify call (with every node's drafts, as exported) equals the step-by-step path (float64): logits,
new K/V and drafts.

The step-by-step path is the tests' oracle (`oracle.py`: the decoder stack over the official modules) one token at
a time (the AR model), its tree call for the new K/V, and `Drafter.draft_logits` + top-m from each node's hidden
state for the drafts. Trees: full
top-2, a hand-made sparse one, a greedy N = 16; root positions early, middle and near the frame's end,
where the full-tree module runs with clamped (ignored) nodes and the pruned module drops them.
"""

import pytest
import torch

import oracle
from conftest import frame_inputs
from drafting import TABLE, random_drafters
from helpers.method.calibration import greedy_tree
from helpers.method.decoding import Decoder
from helpers.method.export_step import DraftingStep
from helpers.method.stack import FusedCore, KVCache, ViewStep, causal_mask
from helpers.method.round import Drafts, Prefill
from helpers.method.sampler import SamplerConfig
from helpers.method.tree import SparseTree, TreeIndex

TREES = {"full2x3": SparseTree.full(2, 3),
         "sparse7": SparseTree([(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]),
         "greedy16": greedy_tree(TABLE, 16)}
TOL = 1e-9


def _committed_cache(cp, g, c0, committed):
    cache = cp.new_cache(1)
    oracle.prefill(cp, cache, g, c0)
    for i, tok in enumerate(committed, start=1):
        _, k, v = oracle.query(cp, cache, cp.embed(torch.tensor([[tok]]), [i]), causal_mask(1))
        cache.commit(k, v)
    return cache


def _sequential_hidden(cp, cache, tree, tokens, t, live):
    """Pre-norm state of every live query token, feeding its path one token per call (each node extends
    its parent's cache by one call). tokens: the query [root, nodes...] as ints -> {query index: r [1, H]}
    (h = oracle.final_norm(cp, r))."""
    caches, hidden = {}, {}
    for qi in live:
        parent = int(tree.parent[qi])
        base = cache if parent < 0 else caches[parent]
        c = KVCache(base.k.clone(), base.v.clone(), base.length)
        h, k, v = oracle.query(cp, c, cp.embed(torch.tensor([[tokens[qi]]]), [t + int(tree.depth[qi])]),
                               causal_mask(1), prenorm=True)
        c.commit(k, v)
        caches[qi], hidden[qi] = c, h[:, 0]
    return hidden


@pytest.mark.parametrize("tree_name,drafter_name", [("full2x3", "reused"), ("sparse7", "offsets"),
                                                   ("greedy16", "medusa"), ("greedy16", "offsets"),
                                                   ("sparse7", "offsets_prenorm"), ("greedy16", "offsets_prenorm")])
@pytest.mark.parametrize("t,pruned", [(1, False), (6, False), (12, False), (12, True), (13, True)])
def test_fused_call_equals_step_by_step(tiny, tree_name, drafter_name, t, pruned):
    spec, _, cp = tiny
    full = TREES[tree_name]
    tree = full.pruned(cp.num_codes - 1 - t) if pruned else full
    drafter = random_drafters(cp, seed=t)[drafter_name]
    core = FusedCore(cp)
    step = DraftingStep(core, tree, drafter)
    gen = torch.Generator().manual_seed(t)
    g, c0 = frame_inputs(spec, 1, seed=t)
    committed = torch.randint(0, spec.vocab_size, (t - 1,), generator=gen).tolist()     # c1..c_{t-1}
    root = int(torch.randint(0, spec.vocab_size, (1,), generator=gen))                  # c_t
    nodes = torch.randint(0, spec.vocab_size, (tree.size,), generator=gen).tolist()
    cache = _committed_cache(cp, g, c0, committed)
    query = torch.tensor([[root] + nodes])
    logits, k_new, v_new, drafts = step(query, cache.k, cache.v, torch.tensor([t]))     # eager, rows gathered
    traced = torch.jit.trace(step, (query, cache.k, cache.v, torch.tensor([t])), check_trace=False)(
        query, cache.k, cache.v, torch.tensor([t]))                                      # as exported
    views = ViewStep(core, tree, prenorm=drafter.prenorm)(query, cache.k, cache.v, torch.tensor([t]))   # the CPU's
    for a, b in zip((logits, k_new, v_new, drafts), traced):
        assert torch.equal(a, b)
    for a, b in zip((logits, k_new, v_new), views):
        assert torch.equal(a, b)
    assert logits.shape == (1, tree.size + 1, spec.vocab_size)
    assert k_new.shape == (spec.num_layers, 1, spec.num_kv_heads, tree.size + 1, spec.head_dim)
    assert drafts.shape == (1, tree.size + 1, tree.max_depth, max(tree.width)) and drafts.dtype == torch.long

    # new K/V: the step-by-step module's tree call (itself equal to sequential calls, test_code_predictor)
    depth = tree.depth.tolist()
    _, k_ref, v_ref = oracle.query(cp, cache, cp.embed(query, [min(t + d, 15) for d in depth]), tree.mask, tree.depth)
    live = [i for i, d in enumerate(depth) if t + d <= cp.num_codes - 1]               # nodes the walk may use
    assert (k_new[:, :, :, live] - k_ref[:, :, :, live]).abs().max() < TOL
    assert (v_new[:, :, :, live] - v_ref[:, :, :, live]).abs().max() < TOL

    hidden = _sequential_hidden(cp, cache, tree, [root] + nodes, t, live)
    for qi in live:
        r = hidden[qi]
        h = oracle.final_norm(cp, r)
        out_pos = t + depth[qi] + 1                                                     # the code h produces
        ref = cp.logits(h[:, None], [out_pos])[0, 0]
        assert (logits[0, qi] - ref).abs().max() < TOL, f"node {qi}"
        usable = min(tree.max_depth, cp.num_codes - out_pos)                            # drafts within the frame
        if usable:
            state = r if drafter.prenorm else h                                         # what the drafter reads
            cand = drafter.draft_logits(state, out_pos, usable)[0].topk(max(tree.width), dim=-1).indices
            assert torch.equal(drafts[0, qi, :usable], cand), f"drafts of node {qi}"


def test_ar_call_and_prefill_equal_step_by_step(tiny):
    spec, _, cp = tiny
    step = Decoder(cp, SamplerConfig()).modules.verify
    assert step.q == 1 and step.outputs == ("logits", "k_new", "v_new")
    g, c0 = frame_inputs(spec, 3, seed=4)
    cache = cp.new_cache(3)
    logits, k, v, h1 = step.core.prefill(g, c0, cache.k.clone(), cache.v.clone())
    h_ref = oracle.prefill(cp, cache, g, c0)
    assert (h1 - h_ref).abs().max() < TOL and (logits - cp.logits(h_ref[:, None], [1])[:, 0]).abs().max() < TOL
    assert (k - cache.k[:, :, :, :2]).abs().max() < TOL
    tokens = torch.randint(0, spec.vocab_size, (3, 14), generator=torch.Generator().manual_seed(4))
    for t in range(1, 15):
        logits, k, v = step(tokens[:, t - 1:t], cache.k, cache.v, torch.tensor([t]))
        hidden, k_ref, v_ref = oracle.query(cp, cache, cp.embed(tokens[:, t - 1:t], [t]), causal_mask(1))
        assert (logits[:, 0] - cp.logits(hidden, [t + 1])[:, 0]).abs().max() < TOL
        assert (k - k_ref).abs().max() < TOL and (v - v_ref).abs().max() < TOL
        cache.commit(k_ref, v_ref)


def test_prefill_drafts_and_refresh(tiny):
    spec, _, cp = tiny
    core = FusedCore(cp)
    g, c0 = frame_inputs(spec, 1, seed=5)
    u = torch.rand(cp.num_codes, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    for kind in ("offsets", "offsets_prenorm"):            # round 1 drafts from h_1, or r_1 (before the final norm)
        drafter = random_drafters(cp, seed=1)[kind]
        h1 = oracle.prefill(cp, cp.new_cache(1), g, c0, prenorm=drafter.prenorm)
        cache = cp.new_cache(1)
        logits, _, _, h1_fused = core.prefill(g, c0, cache.k, cache.v, prenorm=drafter.prenorm)
        assert (h1_fused - h1).abs().max() < TOL
        assert (logits - cp.logits(oracle.prefill(cp, cp.new_cache(1), g, c0)[:, None], [1])[:, 0]).abs().max() < TOL
        ref = drafter.draft_logits(h1, 1, 3)[0].topk(2, dim=-1).indices
        tree = TREES["full2x3"]
        prefill = Prefill(core, SamplerConfig(), Drafts(core, drafter, 3, 2), TreeIndex(tree, cp.device))
        codes = torch.zeros(cp.num_codes, dtype=torch.long)
        query, cand = prefill(g, c0, cache.k, cache.v, u, codes)
        assert torch.equal(cand, ref)
        assert query.tolist() == [[int(codes[0])] + ref[tree.depth[1:] - 1, tree.rank[1:]].tolist()]
    assert not core.refresh()                                   # unchanged weights: nothing rebuilt
    head = cp.official.lm_head[0].weight
    with torch.no_grad():
        head.mul_(2.0)
    try:
        assert core.refresh() and torch.equal(core.heads[0], head.t())
    finally:
        with torch.no_grad():
            head.mul_(0.5)
        core.refresh()

