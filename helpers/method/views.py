"""The CPU's eager call: the verify call with the root position as a host int, its per-t rows read as views.

On a CPU an eager call need not gather: `ViewStep` reads the rows of root position t (embedding offsets, RoPE,
mask) as views of the step's tables and multiplies by the target heads themselves, so no head is copied per call,
and it runs any matrix kernel of `helpers.method.kernels` (prepacked, w8a16, w8a8: the CPU deployments). It is
`FusedStep` (`helpers.method.stack`) otherwise, and returns the same outputs. The eager decoders on a CPU use it
(`views=True`, their default there); compiled, captured, traced and CUDA calls use the gathered `FusedStep`.
"""

from __future__ import annotations

import torch

from helpers.method.stack import FusedStep


class ViewStep(FusedStep):
    """`FusedStep` at a host int t: forward(tokens, k, v, t [1] on the CPU) reads int(t) (a host read, so never
    captured) and calls `call_at`."""

    def tables(self) -> None:
        """`FusedStep.tables`, and `rows[t]`: everything a call at root position t reads, as views, with each depth
        group's head (the dense rows or the kernel's linears; past c15, the last)."""
        super().tables()
        core, n = self.core, self.core.num_codes
        self.rows = [(self.emb_offset[t], self.cos_t[t], self.sin_t[t], self.mask_t[t],
                      [core.head_linears[min(t + d, n - 1)] for d, _, _ in self.groups]) for t in range(n)]

    def forward(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: torch.Tensor):
        return self.call_at(tokens, k_cache, v_cache, int(t))

    def call_at(self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, t: int):
        """The call at root position t (a host int)."""
        if self.generation != self.core.generation:
            self.tables()
        return self.call(tokens, k_cache, v_cache, *self.rows[t])
