"""The paper's numbers (`paper_numbers.yaml` beside this file, a copy of the paper's tables as data)."""

from __future__ import annotations

from pathlib import Path

import yaml

PAPER = yaml.safe_load((Path(__file__).parent / "paper_numbers.yaml").read_text())
PAPER_DRAFTERS = {"reused": "reused_lm_heads", "medusa": "medusa_heads", "offsets": "position_offsets"}
# (the pre-norm offsets, "offsets_prenorm", are this project's ablation: the paper has no row for them)
