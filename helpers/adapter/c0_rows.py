"""E0's rows must be unique: the inner loop recovers c0 from E0(c0) by exact row match, so it is checked at load.

    check_c0_rows(model.talker, inner_dtype=torch.float64)      # ValueError naming the rows that coincide

The official talker hands the code predictor `E0(c0)`, the row of its codec embedding, not `c0`
(`helpers.adapter.inner_loop.InnerLoop.c0_from_embedding`). Every row the talker can hand over (c0's codebook, and the
codec's end and pad rows of a batch) must therefore differ from every other row of E0, compared in the narrower of
the talker's and the inner loop's dtypes (the comparison the inner loop makes). Rows the talker never samples may
coincide among themselves.
"""

from __future__ import annotations

import torch
from torch import nn

AS_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}       # element size -> integer view of the same bits
SHOWN = 5                                                        # coinciding rows named in the error


def emitted_rows(talker: nn.Module) -> list[int]:
    """The E0 rows the talker can hand the code predictor: c0's codebook (the code predictor's vocabulary), then the
    codec's end and pad rows where the config names rows of the table (a finished row of a batch)."""
    vocab, rows = talker.code_predictor.config.vocab_size, talker.get_input_embeddings().num_embeddings
    if vocab > rows:
        raise ValueError(f"the talker's codec embedding (E0) has {rows} rows, fewer than c0's codebook ({vocab} "
                         "codes): not a Qwen3-TTS talker")
    specials = [getattr(talker.config, name, None) for name in ("codec_eos_token_id", "codec_pad_id")]
    return list(range(vocab)) + sorted({i for i in specials if i is not None and vocab <= i < rows})


def narrowest(*dtypes: torch.dtype | None) -> torch.dtype:
    """The dtype with the largest epsilon (None entries ignored): where two copies of E0 compare."""
    return max((d for d in dtypes if d is not None), key=lambda d: torch.finfo(d).eps)


def check_c0_rows(talker: nn.Module, inner_dtype: torch.dtype | None = None) -> None:
    """Refuse a talker whose E0 rows the inner loop could not tell apart (see the module docstring)."""
    weight = talker.get_input_embeddings().weight.detach()
    dtype = narrowest(weight.dtype, inner_dtype)
    table = weight.to(device="cpu", dtype=dtype) + 0.0                 # -0.0 -> 0.0: bits equal where == holds
    rows = torch.tensor(emitted_rows(talker), device="cpu")
    finite = torch.isfinite(table[rows]).all(-1)
    if not bool(finite.all()):
        bad = rows[~finite][:SHOWN].tolist()
        raise ValueError(f"E0 (the talker's codec embedding) has non-finite rows {bad}: the inner loop recovers c0 by "
                         "exact row match, which a NaN row never gives; the checkpoint's weights are damaged")
    _, inverse, counts = torch.unique(table.view(AS_BITS[table.element_size()]), dim=0, return_inverse=True,
                                      return_counts=True)
    shared = rows[counts[inverse[rows]] > 1]
    if shared.numel():
        pairs = [(int(r), [int(j) for j in torch.nonzero(inverse == inverse[r]).flatten() if j != r])
                 for r in shared[:SHOWN]]
        named = "; ".join(f"row {r} equals row(s) {others}" for r, others in pairs)
        raise ValueError(
            f"E0 (the talker's codec embedding) has {shared.numel()} row(s) the talker can hand the code predictor "
            f"that equal another row in {str(dtype).removeprefix('torch.')}: {named}. The inner loop recovers c0 "
            "from E0(c0) by exact row match, so it cannot follow this checkpoint. Use a checkpoint whose E0 rows are "
            "distinct, or run the model (dtype) and inner loop (inner_loop_dtype) in a dtype where they are")
