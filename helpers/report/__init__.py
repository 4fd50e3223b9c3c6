"""Reporting: a run's numbers as the tables, figures and sentences each notebook shows, and `report.md` beside the
paper's numbers.

One module per notebook turns that notebook's numbers into what it shows: `nb00_overview` (the drafters' cost, one
frame step by step, the toy round of `helpers.method.reference_round` told round by round, its try-it cell),
`nb01_data` (the codec's levels, the miniature's build and training curves), `nb02_drafters` (how training ended,
the offsets' checks, the controlled drift in words), `nb03_tree` (node tokens, the ideal drafter, the tree's margin,
what limits tokens/step, the try-it tree), `nb04_decoding` (losslessness, Table 2, the gains per language),
`nb05_quality` (error rates over seeds, the paired PER test, parity), `nb06_latency` (the latency sweep, the
deployments, the real size, Figure 4 for a CPU, the GPU reference, the 0.6B projection), `nb07_coreml` (the Core ML
packages) and `nb08_report` (report.md, and the README's results block). Beside them: `plots` (the figures more than
one notebook draws, the paper's Figures 1-4, a figure's record for the notebook check), `paper` (the paper's numbers,
`paper_numbers.yaml`, and what is derived from them, labelled), `tables` (Markdown and CSV tables).

Imports: `helpers.measure`, `helpers.method`, `helpers.adapter`, `helpers.artifacts`; a notebook module may import
`paper`, `plots`, `tables` and an earlier notebook's module. It reads a run's parameters from its metrics.json, not
from the experiment layer.
"""
