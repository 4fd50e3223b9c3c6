"""The fused draft+verify call: one static-shape module per tree, used by the decoders and exported as is.

`FusedStep(core, tree, drafter)` is one round of speculative decoding as a single `nn.Module`:

    forward(tokens [B, q], k [L, B, kv, S, d], v [L, B, kv, S, d], t [1] int)
      -> logits [B, q, V]            target logits at the root and every node (before the sampler)
         k_new, v_new [L, B, kv, q, d] keys/values of the query (the host commits the accepted path)
         drafts [B, q, D, m] (long)  next round's top-m candidates at depths 1..D from EVERY node
                                     (B = 1: one stream; or hidden [B, q, H] when the drafter cannot be fused)

A pre-norm drafter (`Drafter.prenorm`, offsets added to the residual stream before the final RMSNorm) keeps the last
layer's output r and reads norm(r + [0, b_1..b_D]): row 0 is norm(r) = h, the target logits; nothing else changes.

`q = N + 1` is the root (`c_t`, the code just sampled) followed by the tree's nodes; `t` is the root's
code position (1..14). Everything that depends on `t` is a row of a buffer indexed by `t` (one
`index_select` each): the flat embedding-row offset of each token (the 15 input tables `E_1..E_15`
are stacked into one [15 V, H_talker] table), RoPE cos/sin of each token (position `t + 1 + depth`),
the additive mask over [cache slots, query] (slots `< t + 1` visible, then the ancestor mask), and a
window of head indices (the 15 heads are stacked into [15, V, H]; nodes at depth `d` all use head
`t + d`, so each depth group reads one row of one gathered window). No Python control flow depends
on tensor values, every tensor has rank <= 5, and the AR call is the same module with `tree=None`
(q = 1, no drafts).

Near the frame's end (root at `t`, nodes deeper than `14 - t`) a module built on the full tree still
runs with clamped table/head indices; those nodes' outputs are meaningless and the host never
descends into them (the walk uses the pruned tree). The PyTorch decoder instead uses one module per
distinct pruned tree (`FusedCore.step`), which saves their compute. Either way the committed codes
are the AR codes.

This is the deployed decoder stack; its reference is `helpers.method.predictor.CodePredictor` (the same
computation over the official modules as they are), and the tests check the two agree.

`FusedCore` (`core.py`) holds what the step modules share: copies of the official weights laid out for few, cheap
ops (stacked tables; heads and projections transposed to [in, out], q/k/v and gate/up each stacked into
one matrix; merged q/k norm weights; RoPE tables). Copies are rebuilt by `refresh()` when the official
weights change (data pointer or version).

The package, one idea a file: `core.py` (the weights laid out once and the decoder stack over them), `step.py`
(`FusedStep`, one call per tree), `plans.py` (`FusedPlan`, what the host needs for a round at each root position,
and its walk).
"""

from helpers.method.fused.core import FusedCore, rms_norm_one_kernel, shared_core
from helpers.method.fused.plans import FusedPlan, make_plans
from helpers.method.fused.step import FusedStep, fusable

__all__ = ["FusedCore", "FusedPlan", "FusedStep", "fusable", "make_plans", "rms_norm_one_kernel", "shared_core"]
