"""The fused verify call: one static-shape module per tree, the verify phase of every round
(`helpers.method.round`) and the call a device exports.

`FusedStep(core, tree, drafter=None)`:

    forward(tokens [B, q], k [L, B, kv, S, d], v [L, B, kv, S, d], t [1] int)
      -> logits [B, q, V]              target logits at the root and every node (before the sampler)
         k_new, v_new [L, B, kv, q, d] keys/values of the query (the round commits the accepted path's)
         hidden [B, q, H]              every token's state (r before the final norm for a prenorm drafter)
         or drafts [B, q, D, m] (long) with a drafter: top-m candidates at depths 1..D from EVERY node (B = 1), for a
                                       device whose walk runs on its host after the call (the Core ML export)

`q = N + 1` is the root (`c_t`, the code just sampled) followed by the tree's nodes; `t` is the root's code position
(1..14). Everything that depends on `t` is a row of a buffer indexed by `t` (one `index_select` each): the flat
embedding-row offset of each token (the 15 input tables `E_1..E_15` stacked into one [15 V, H_talker] table), RoPE
cos/sin of each token (position `t + 1 + depth`), the additive mask over [cache slots, query] (slots `< t + 1`
visible, then the ancestor mask), and the target head of each depth group (the 15 heads stacked into [15, H, V];
nodes at depth `d` all use head `t + d`). No Python control flow depends on tensor values, every tensor has rank
<= 5, and the AR call is the same module with `tree=None` (q = 1). Eager calls on a CPU read those rows as views at
a host int t instead (`call_at`), which also serves the CPU deployment kernels.

Near the frame's end (root at `t`, nodes deeper than `14 - t`) a module built on the full tree still runs with
clamped table/head indices; those nodes' outputs are meaningless. The decoders use one module per distinct pruned
tree, which saves their compute; either way the committed codes are the AR codes.

This is the project's one decoder stack: `CodePredictor`'s calls at any query run it too (dense kernel). The tests
set it against the official forward and against an oracle written over the official modules as they are.

`FusedCore` (`core.py`) holds what the step modules share: copies of the official weights laid out for few, cheap
ops (stacked tables; heads and projections transposed to [in, out], q/k/v and gate/up each stacked into one matrix;
merged q/k norm weights; RoPE tables). Copies are rebuilt by `refresh()` when the official weights change (data
pointer or version). `step.py` holds `FusedStep`.
"""

from helpers.method.fused.core import FusedCore, rms_norm_one_kernel
from helpers.method.fused.step import FusedStep, fusable

__all__ = ["FusedCore", "FusedStep", "fusable", "rms_norm_one_kernel"]
