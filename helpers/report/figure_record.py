"""What a figure says about itself, kept beside its image in the notebook so that the notebook check can read it
(`helpers.experiment.notebook_check`): each axis's scale and label, and each legend entry with the provenance of
the points it names.

A plotting helper marks points that are not the paper's as printed with `mark(artist, "derived")` (or "inferred"):
the artist's gid carries the provenance, and a legend entry of such points that calls them "paper" without saying
"derived" / "inferred" is a problem the check reports. `RunOutputs.figure` shows the figure with
`{"figure": figure_record(fig)}` as its output metadata.
"""

from __future__ import annotations

PROVENANCES = ("derived", "inferred")


def mark(artist, provenance: str):
    """Tag a plotted artist with where its values come from ("derived" or "inferred"); returns the artist."""
    if provenance not in PROVENANCES:
        raise ValueError(f"provenance must be one of {PROVENANCES}, got {provenance!r}")
    artist.set_gid(provenance)
    return artist


def figure_record(fig) -> dict:
    """{"axes": [{"axis": "x" | "y", "scale": "linear" | "log" | ..., "label": str}, ...] for every axis of every
    subplot, "legend": [{"label": str, "provenance": "derived" | "inferred" | None}, ...] for every legend entry}."""
    axes, legend = [], []
    for ax in fig.axes:
        axes += [{"axis": "x", "scale": ax.get_xscale(), "label": ax.get_xlabel()},
                 {"axis": "y", "scale": ax.get_yscale(), "label": ax.get_ylabel()}]
        handles, labels = ax.get_legend_handles_labels()
        legend += [{"label": label, "provenance": h.get_gid() if h.get_gid() in PROVENANCES else None}
                   for h, label in zip(handles, labels)]
    return {"axes": axes, "legend": legend}
