"""Notebook 07 (Core ML export): the table and metrics of the export (`helpers.measure.coreml_export.export_calls`'s
report).

    coreml_rows(report)                              # one row per package: name, q, size MB, max abs error
    coreml_metrics(report, "Linux", tree_size=8)     # metrics.json's "coreml" section
"""

from __future__ import annotations


def coreml_rows(report) -> list[dict]:
    """One row per exported package (`report.packages`: name, q, size_mb, max_abs_err; the error None off macOS)."""
    return [{"package": p.name, "q": p.q, "size MB": p.size_mb, "max abs error vs PyTorch": p.max_abs_err}
            for p in report.packages]


def coreml_metrics(report, system: str, tree_size: int) -> dict:
    """{package name: {"size_mb", "q", "max_abs_err"}, "system": the OS the export ran on, "tree_size"}."""
    return ({p.name: {"size_mb": p.size_mb, "q": p.q, "max_abs_err": p.max_abs_err} for p in report.packages}
            | {"system": system, "tree_size": tree_size})
