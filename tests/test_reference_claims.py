"""The committed reference (outputs/mini-reference/) as a referee reads it: every timing record keeps the load
average at its start and end, the headline carries its spread from passes of one run and its count on at least 100
frames, Figure 4's rows of this CPU are called projected, and the frame model's numbers are called model."""

import json
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "outputs" / "mini-reference"
METRICS = json.loads((REFERENCE / "metrics.json").read_text())
LOSSLESS_FRAMES = 100           # a lossless claim stands on at least this many counted frames


def shown(name: str) -> str:
    """Everything an executed reference notebook shows (markdown cells, text and markdown outputs)."""
    out = []
    for c in nbformat.read(REFERENCE / name, as_version=4).cells:
        out.append(c.source if c.cell_type == "markdown" else "")
        for o in c.get("outputs", []):
            out.append("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/markdown", "")))
    return "\n".join(out)


def test_every_timing_record_keeps_its_load_at_start_and_end():
    records = {"full_size": METRICS["full_size"]["machine"], "deployments": METRICS["deployments"]["machine"],
               **{f"latency.{d}": lat["machine"] for d, lat in METRICS["latency"].items()}}
    for name, machine in records.items():
        load = machine.get("load") or {}
        assert load.get("start") is not None and load.get("end") is not None, name
    assert "load average" in shown("06_latency.ipynb")


def test_the_headline_carries_its_spread_and_is_counted_on_enough_frames():
    fs = METRICS["full_size"]
    spread, ident = fs["spread"], fs["identity"]
    assert len(spread["passes"]) >= 3 and spread["min"] <= spread["median"] <= spread["max"]
    assert ident["frames"] >= LOSSLESS_FRAMES and ident["identical"][fs["fastest_spec"]] == ident["frames"]
    for text in (shown("06_latency.ipynb"), (REFERENCE / "report.md").read_text(), (ROOT / "README.md").read_text()):
        assert f"{len(spread['passes'])} interleaved passes" in text and f"of {ident['frames']} frames" in text


def test_figure_4_rows_of_this_cpu_are_projected_and_the_model_is_called_model():
    report, nb06 = (REFERENCE / "report.md").read_text(), shown("06_latency.ipynb")
    for text in (report, nb06):
        assert "| measured: " not in text                           # a projection is not a measurement
        for name, m in METRICS["full_size"]["model"].items():     # the model's numbers come with the word
            for v in m["round_over_ar_step"].values():
                for sentence in re.split(r"(?<=[.;])\s", text):
                    if f"{v:.2f} AR steps" in sentence and name in sentence:
                        assert "model" in sentence, sentence
