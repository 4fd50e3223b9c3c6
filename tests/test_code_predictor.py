"""The adapter reproduces the official code predictor; its one decoder stack equals the oracle (the stack written
over the official modules, `oracle.py`); a tree call equals sequential calls."""

import pytest
import torch

import oracle
from conftest import SPECS, frame_inputs
from helpers.method.predictor import CodePredictor
from helpers.method.stack import causal_mask
from helpers.adapter.tiny import build_tiny_talker
from helpers.method.tree import SparseTree

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def test_teacher_forced_logits_match_official_forward(tiny):
    spec, talker, cp = tiny
    g, c0 = frame_inputs(spec, 4, seed=0)
    codes = torch.cat((c0[:, None], torch.randint(0, spec.vocab_size, (4, 15))), dim=1)
    h = cp.teacher_forced_hidden(g, codes)
    ours = torch.stack([cp.logits(h[:, t - 1:t], [t])[:, 0] for t in range(1, 16)], dim=1)
    with torch.no_grad():
        official, _ = talker.forward_sub_talker_finetune(codes, g)
    # The official path rounds RMSNorm/softmax to float32; ours stays float64.
    assert torch.allclose(ours, official, rtol=0, atol=1e-6 * float(official.abs().max()))


@pytest.mark.parametrize("prenorm", [False, True])
def test_stack_equals_oracle_on_a_tree_query(tiny, prenorm):
    spec, _, cp = tiny
    g, c0 = frame_inputs(spec, 2, seed=3)
    cache, ref_cache = cp.new_cache(2), cp.new_cache(2)
    assert (cp.prefill(cache, g, c0, prenorm) - oracle.prefill(cp, ref_cache, g, c0, prenorm)).abs().max() < 1e-9
    tree = SparseTree([(0,), (1,), (0, 0), (0, 1), (0, 0, 0)])
    tokens = torch.randint(0, spec.vocab_size, (2, tree.size + 1), generator=torch.Generator().manual_seed(3))
    x = cp.embed(tokens, [2 + d for d in tree.depth.tolist()])
    ours = cp.forward_query(cache, x, tree.mask, tree.depth, prenorm)
    ref = oracle.query(cp, ref_cache, x, tree.mask, tree.depth, prenorm)
    for a, b in zip(ours, ref):                                   # hidden, k_new, v_new
        assert a.shape == b.shape and (a - b).abs().max() < 1e-9


def _sequential_logits(cp, g, c0, tokens, positions):
    """Logits after feeding prefix tokens one call at a time (the AR model)."""
    cache = cp.new_cache(1)
    h = cp.prefill(cache, g, c0)
    for tok, pos in zip(tokens, positions):
        hidden, k, v = cp.forward_query(cache, cp.embed(torch.tensor([[tok]]), [pos]), causal_mask(1))
        cache.commit(k, v)
        h = hidden[:, 0]
    return cp.logits(h[:, None], [positions[-1] + 1 if positions else 1])[0, 0]


@pytest.mark.parametrize("tree", [SparseTree.full(2, 3), SparseTree([(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0)])],
                         ids=["full2x3", "sparse7"])
@pytest.mark.parametrize("t", [1, 4, 11])
def test_tree_call_equals_sequential_calls(tiny, tree, t):
    spec, talker, cp = tiny
    gen = torch.Generator().manual_seed(t)
    g, c0 = frame_inputs(spec, 1, seed=t)
    committed = torch.randint(0, spec.vocab_size, (t - 1,), generator=gen).tolist()   # c1..c_{t-1}
    root = int(torch.randint(0, spec.vocab_size, (1,), generator=gen))                # c_t
    nodes = torch.randint(0, spec.vocab_size, (tree.size,), generator=gen).tolist()
    cache = cp.new_cache(1)
    cp.prefill(cache, g, c0)
    for i, tok in enumerate(committed, start=1):
        _, k, v = cp.forward_query(cache, cp.embed(torch.tensor([[tok]]), [i]), causal_mask(1))
        cache.commit(k, v)
    depth = tree.depth.tolist()
    query = torch.tensor([[root] + nodes])
    hidden, _, _ = cp.forward_query(cache, cp.embed(query, [t + d for d in depth]), tree.mask, tree.depth)
    tree_logits = cp.logits(hidden, [t + d + 1 for d in depth])[0]
    for qi in range(tree.size + 1):
        chain = [qi]
        while tree.parent[chain[-1]] > 0:
            chain.append(int(tree.parent[chain[-1]]))
        path_tokens = [nodes[j - 1] for j in reversed(chain) if j > 0]
        toks = committed + [root] + path_tokens
        ref = _sequential_logits(cp, g, c0, toks, list(range(1, len(toks) + 1)))
        assert (tree_logits[qi] - ref).abs().max() < 1e-9, f"node {qi} of {tree}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.bfloat16, 0.15)])
def test_lower_precision_and_devices_track_float64(dtype, tol, device):
    spec = SPECS["h96gqa"]
    ref = CodePredictor.from_talker(build_tiny_talker(spec, seed=1, dtype=torch.float64))
    low = CodePredictor.from_talker(build_tiny_talker(spec, seed=1, dtype=dtype).to(device))
    g, c0 = frame_inputs(spec, 3, seed=5)
    codes = torch.cat((c0[:, None], torch.randint(0, spec.vocab_size, (3, 15))), dim=1)
    h_ref = ref.teacher_forced_hidden(g, codes)
    h_low = low.teacher_forced_hidden(g.to(device, dtype), codes.to(device))
    assert h_low.dtype == dtype and h_low.device.type == device
    err = (h_low.double().cpu() - h_ref).abs().max() / h_ref.abs().max()
    assert err < tol


def test_query_longer_than_cache_is_refused(tiny):
    spec, talker, _ = tiny
    cp = CodePredictor.from_talker(talker, max_query=4)
    cache = cp.new_cache(1)
    x = torch.zeros(1, 5, spec.talker_hidden_size, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"query of 5 tokens .* max_query=4"):
        cp.forward_query(cache, x, causal_mask(5))


def test_codes_outside_vocabulary_are_refused(tiny):
    spec, talker, cp = tiny
    g, c0 = frame_inputs(spec, 1, seed=0)
    codes = torch.zeros(1, 16, dtype=torch.long)
    codes[0, 3] = spec.vocab_size
    with pytest.raises(ValueError, match=rf"code {spec.vocab_size} at code position 3 .* allowed 0..{spec.vocab_size - 1}"):
        cp.teacher_forced_hidden(g, codes)
