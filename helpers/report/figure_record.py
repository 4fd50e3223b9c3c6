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
        legend += [{"label": label, "provenance": _provenance(h)} for h, label in zip(handles, labels)]
    return {"axes": axes, "legend": legend}


def _provenance(handle) -> str | None:
    """A legend handle's provenance mark: its gid, or its first artist's for a container (a bar chart's bars)."""
    artist = handle[0] if not hasattr(handle, "get_gid") and len(handle) else handle
    gid = artist.get_gid() if hasattr(artist, "get_gid") else None
    return gid if gid in PROVENANCES else None
