"""metrics.json written under older key names read with today's, wherever a run's metrics are read back (report.md,
`helpers.experiment.run.metrics`): tokens/step once `toks_per_step`, the round's draft phase once "query"."""

from __future__ import annotations

RENAMED = {"query": "draft"}          # whole keys: the profile's phase of the next round's drafts


def legacy_keys_renamed(metrics):
    """metrics read with today's keys: `toks_per_step` -> `tokens_per_step` in any key, and the keys of `RENAMED`."""
    if isinstance(metrics, dict):
        return {RENAMED.get(k, k.replace("toks_per_step", "tokens_per_step")): legacy_keys_renamed(v)
                for k, v in metrics.items()}
    return [legacy_keys_renamed(v) for v in metrics] if isinstance(metrics, list) else metrics
