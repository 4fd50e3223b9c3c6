"""metrics.json written before tokens/step had one name (`toks_per_step`) read with today's keys, wherever a run's
metrics are read back (report.md, `helpers.experiment.run.metrics`)."""

from __future__ import annotations


def legacy_keys_renamed(metrics):
    """metrics.json written before tokens/step had one name (`toks_per_step`) read with today's keys."""
    if isinstance(metrics, dict):
        return {k.replace("toks_per_step", "tokens_per_step"): legacy_keys_renamed(v) for k, v in metrics.items()}
    return [legacy_keys_renamed(v) for v in metrics] if isinstance(metrics, list) else metrics
