"""A notebook's first line after its `parameters` cell: `P, out = setup(globals())`.

`P` is the validated RunParams (the parameters cell's values over the params file; the working directory is
then the repository root); `out` writes this run's outputs: `out.figure(fig, name)` (figures/<name>.png),
`out.table(rows, name)` (tables/<name>.csv and .md; returns the Markdown) and `out.metrics(section)`
(merged into metrics.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helpers.experiment.metrics import update_metrics
from helpers.experiment.params import RunParams, notebook_params
from helpers.report.plots import save as save_figure
from helpers.report.tables import write_table


@dataclass
class RunOutputs:
    """Where a notebook writes: the run folder of `P` and its figures/ and tables/."""

    P: RunParams

    @property
    def figures(self) -> Path:
        return self.P.run_dir / "figures"

    @property
    def tables(self) -> Path:
        return self.P.run_dir / "tables"

    def figure(self, fig, name: str) -> Path:
        return save_figure(fig, self.figures, name)

    def table(self, rows: list[dict], name: str) -> str:
        return write_table(rows, self.tables / name)

    def metrics(self, section: dict) -> dict:
        return update_metrics(self.P, section)


def setup(namespace: dict) -> tuple[RunParams, RunOutputs]:
    """Validate the notebook's parameters (`namespace`: its globals()) and say where its outputs go."""
    P = notebook_params(namespace)
    print(f"run {P.run_name!r}: backend {P.backend}, outputs in {P.run_dir}/")
    return P, RunOutputs(P)
