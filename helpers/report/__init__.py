"""Reporting: a finished run's numbers as tables, figures and `report.md`, beside the paper's.

`tables` (CSV / Markdown), `plots` (every figure), `report` (report.md from metrics.json and
`paper_numbers.yaml`), `summary` (its number-bearing sentences), `overview` (the 0.6B model's sizes and one frame
step by step, for notebook 00), `walkthrough` (notebook 00's toy round) and `walkthrough_text` (its rounds and
descent check as text and rows), `try_it` (the try-it cells of 00 and 03), `built_on` (where a build duration was
measured), `codec_levels` and `training_curves` (notebook 01), `offsets_text` (notebook 02's offsets checks and
sentences), `tree_tables` (notebook 03's node tokens and ideal-drafter rows), `limits` (notebook 03: what limits
tokens/step), `quality_table` and `paired_per` (notebook 05: the quality stage per language, the paired PER test),
`latency_metrics` (notebook 06: the latency table and ratios), `coreml_table` (notebook 07's packages),
`latency_story` (06's paragraphs from its numbers), `speed_sentences` (the speed sentences, checked against their
numbers), `projection` (the 0.6B projection: the paper's own points, the fastest lossless AR call, w8a8 apart),
`figure_record` (a figure's axes and legend provenance, for the notebook check).

Imports: `helpers.measure`, `helpers.method`, `helpers.adapter`, `helpers.artifacts`; it reads a run's
parameters from its metrics.json, not from the experiment layer.
"""
