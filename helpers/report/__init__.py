"""Reporting: a finished run's numbers as tables, figures and `report.md`, beside the paper's.

`tables` (CSV / Markdown), `plots` (every figure), `report` (report.md from metrics.json and
`paper_numbers.yaml`), `overview` (the 0.6B model's sizes and one frame step by step, for notebook 00).

Imports: `helpers.measure`, `helpers.method`, `helpers.adapter`, `helpers.artifacts`; it reads a run's
parameters from its metrics.json, not from the experiment layer.
"""
