"""A notebook's first line after its `parameters` cell: `P, out = setup(globals())`.

`P` is the validated RunParams (the parameters cell's values over the params file; the working directory is
then the repository root); `out` writes this run's outputs: `out.figure(fig, name, caption)` (figures/<name>.png, shown with its caption),
`out.table(rows, name)` (tables/<name>.csv and .md; returns the Markdown) and `out.metrics(section)`
(merged into metrics.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helpers.experiment.run.metrics import run_info, update_metrics
from helpers.experiment.run.params import REPO_ROOT, RunParams, notebook_params
from helpers.experiment.run.process import process_settings, run_threads
from helpers.experiment.run.quiet import silence_banners, under_runner
from helpers.experiment.run.notebook_check import CAPTION
from helpers.report.plots import figure_record, save as save_figure
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

    def figure(self, fig, name: str, caption: str | None = None) -> None:
        """Save figures/<name>.png, show it, then its caption (what to look at) as "*Figure <name>.* caption"."""
        import matplotlib.pyplot as plt
        from IPython.display import Markdown, display
        save_figure(fig, self.figures, name)
        display(fig, metadata={"figure": figure_record(fig)})       # axes' scales and labels, for the notebook check
        plt.close(fig)
        if caption:
            display(Markdown(f"{CAPTION} {name}.* {caption}"))

    def table(self, rows: list[dict], name: str) -> str:
        return write_table(rows, self.tables / name)

    def metrics(self, section: dict) -> dict:
        return update_metrics(self.P, section)


def shown_path(path, P: RunParams) -> str:
    """A path as a notebook shows it: relative to the project, or to the run's output / cache folder where it lies
    outside the project (never the machine's absolute path)."""
    path = Path(path).resolve()
    for root, name in ((P.cache_dir, "<cache_dir>"), (P.output_dir, "<output_dir>")):
        root = Path(root).resolve()
        if path.is_relative_to(root) and not root.is_relative_to(REPO_ROOT):
            return "/".join((name, *path.relative_to(root).parts))
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else path.name


def setup(namespace: dict) -> tuple[RunParams, RunOutputs]:
    """Validate the notebook's parameters (`namespace`: its globals()), silence the libraries' known banners
    (`helpers.experiment.run.quiet`), set the kernel's process-wide settings (`helpers.experiment.run.process`: one
    torch thread for the miniature) and say where the outputs go. Outside the runner (JupyterLab, papermill alone) the
    notebook records the run's `run` section itself (params, versions, revision: `metrics.run_info`), with
    `runner` false: no runner times the notebooks (`run.wall_s`), and notebook 08 does not ask for it."""
    silence_banners()
    P = notebook_params(namespace)
    process_settings(run_threads(P.backend))
    if not under_runner():
        update_metrics(P, {"run": {**run_info(P), "runner": False}})
    where = "beside this notebook" if under_runner() else f"in {shown_path(P.run_dir, P)}/"
    print(f"run {P.run_name!r}: backend {P.backend}; figures/, tables/ and metrics.json {where}")
    return P, RunOutputs(P)
