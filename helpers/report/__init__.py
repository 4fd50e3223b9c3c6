"""Reporting: a run's numbers as the tables, figures and sentences each notebook shows, `report.md` beside the
paper's numbers, and the README's results block.

A module per notebook turns that notebook's numbers into what only it shows: `nb00_overview` (the drafters' cost,
one frame step by step, the toy round of `helpers.method.reference_round` told round by round, its try-it cell),
`nb01_data` (the codec's levels, the miniature's build and training curves), `nb02_drafters` (how training ended,
the offsets' checks, the controlled drift in words), `nb03_tree` (node tokens, the ideal drafter, the tree's margin,
what limits tokens/step, the try-it tree), `nb04_decoding` (Table 2's gaps, the gains per language), `nb05_quality`
(error rates over seeds, the paired PER test), `nb06_latency` (the latency sweep, a round's phases, the compiled
loops) with `nb06_engines` (the engines a CPU user would run instead), `nb07_coreml` (the Core ML packages) and
`nb08_report` (report.md) with `nb08_summary` (its opening section) and `nb08_comparison` (its closing table).

What several places show lives in a shared module of one concept each:
- results: `drafter_ablation` (Table 2's rows, the main drafter), `losslessness`, `quality_parity` (AR against
  speculative speech across languages), `acceptance_limits` (what caps acceptance);
- speed: `latency_sweep` (the sweep's sentences), `deployments` (the miniature in every CPU deployment),
  `full_size` (the miniature at the real size), `projection` (the 0.6B shape projected, Figure 4 for a CPU),
  `gpu_reference` (the committed GPU reference);
- figures: `plots` (`save`, ticks, provenance marks and the record the notebook check reads; the figures of
  drafting), `decoding_figures` (the draft tree, the paper's Figures 1-3), `speed_figures` (Figure 4, a round's
  phases);
- the rest: `paper` (the paper's numbers, `paper_numbers.yaml`, and what is derived from them, labelled), `tables`
  (Markdown and CSV tables), `readme_results` (the README's results block), `legacy_metrics` (an older
  metrics.json read with today's keys).

Imports: `helpers.measure`, `helpers.method`, `helpers.adapter`, `helpers.artifacts` and the shared modules here. A
notebook's module is imported by that notebook (and tests) and by the modules of the same notebook only: never by a
script, a shared module or another notebook's module. It reads a run's parameters from its metrics.json, not from
the experiment layer.
"""
