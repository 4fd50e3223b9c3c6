"""Notebook 06's latency figures (`helpers.report.nb06_latency`): the table, the metrics section, the call cost and
what the verify call alone leaves of tokens/step, on a `latency_table` built from synthetic timings."""

import json
from pathlib import Path

import nbformat
import pytest

from helpers.measure.latency import latency_table
from helpers.report.latency_sweep import COLUMNS, call_cost
from helpers.report.nb06_latency import CHEAP_VERIFY, latency_rows, latency_section, verify_bound

ROOT = Path(__file__).resolve().parents[1]


def synthetic_lat():
    """`latency_metrics`'s dict from hand-made timings: AR call 1 ms, N = 4 call 1.5 ms, N = 8 call 2 ms."""
    pct = lambda p50: {"p10": p50 * 0.9, "p50": p50, "p90": p50 * 1.1}
    sweep = {"ar": pct(1.0), "trees": {n: {"q": n + 1, "call": pct(c), "overhead": c - 1.0}
                                       for n, c in ((4, 1.5), (8, 2.0))}}
    loop = {"frames": 10, "ar_ms": 15.0, "official_ms": 30.0, "ar_over_official": 2.0,
            "trees": {4: {"frame_ms": 10.0, "tokens_per_step": 1.8, "measured_speedup": 1.5,
                          "speedup_over_tps": 1.5 / 1.8, "identical": True},
                      8: {"frame_ms": 12.0, "tokens_per_step": 2.0, "measured_speedup": 1.25,
                          "speedup_over_tps": 1.25 / 2.0, "identical": True}}}
    profile = {"ar": {"per_call_ms": 1.0},
               "trees": {4: {"ratio": 0.8, "ratio_free_host": 0.9, "ratio_verify_only": 0.95},
                         8: {"ratio": 0.6, "ratio_free_host": 0.7, "ratio_verify_only": 0.5}}}
    return {"device": "cpu", "cuda_graph": False, "frames": 10, **latency_table(sweep, loop), "profile": profile}


def test_rows_and_section():
    lat = synthetic_lat()
    rows = latency_rows(lat["by_n"])
    assert [r["N"] for r in rows] == [4, 8]
    assert list(rows[0]) == ["N", *COLUMNS, "measured / tokens per step"]
    assert rows[0]["overhead"] == pytest.approx(0.5) and rows[0]["realised_speedup"] == pytest.approx(1.8 / 1.5)
    assert rows[1]["measured / tokens per step"] == pytest.approx(0.625)
    s = latency_section(lat, "torch.float32", calls=200, warmup=20)
    assert s["4"] == {k: lat["by_n"][4][k] for k in COLUMNS} and set(s["8"]) == set(COLUMNS)
    assert {k: s[k] for k in ("best_n", "ar_call_ms_p50", "ar_frame_ms", "official_frame_ms", "dtype", "cuda_graph",
                              "calls", "warmup", "frames")} == \
        {"best_n": 4, "ar_call_ms_p50": 1.0, "ar_frame_ms": 15.0, "official_frame_ms": 30.0, "dtype": "torch.float32",
         "cuda_graph": False, "calls": 200, "warmup": 20, "frames": 10}
    assert s["profile"] is lat["profile"]
    json.dumps(s, default=str)


def test_call_cost_and_verify_bound():
    assert call_cost(0.57) == pytest.approx(1.57)
    lat = synthetic_lat()
    cheap = verify_bound(lat["profile"]["trees"][4], lat["by_n"][4]["tokens_per_step"])
    assert cheap["verify"] == pytest.approx(1 / 0.95) and cheap["cheap"] and cheap["bound"] == pytest.approx(1.8 * 0.95)
    dear = verify_bound(lat["profile"]["trees"][8], 2.0)
    assert dear == {"verify": 2.0, "cheap": False, "bound": 1.0}
    assert verify_bound({"ratio_verify_only": 1 / CHEAP_VERIFY}, 2.0)["cheap"] is False   # the border is not cheap
    assert verify_bound({"ratio_verify_only": 0.5}, None)["bound"] is None


def test_reproduces_the_reference_run():
    """From the reference run's metrics.json, the helpers give the numbers its executed notebook 06 printed."""
    ref = ROOT / "outputs" / "mini-reference"
    m = json.loads((ref / "metrics.json").read_text())
    lat = next(iter(m["latency"].values()))
    best = str(lat["best_n"])
    vb = verify_bound(lat["profile"]["trees"][best], lat[best]["tokens_per_step"])
    shown = "\n".join("".join(o.get("data", {}).get("text/markdown", ""))
                      for c in nbformat.read(ref / "06_latency.ipynb", as_version=4).cells for o in c.get("outputs", []))
    assert f"**{vb['verify']:.2f} AR steps**" in shown              # an AR step plus the round's larger layers
    assert (f"buy at most {vb['bound']:.2f}x" in shown) != vb["cheap"]
    assert f"this run's {call_cost(lat[best]['overhead']):.2f} at N = {best}" in shown


def test_notebook_06_calls_it():
    source = "\n".join(c.source for c in nbformat.read(ROOT / "notebooks" / "06_latency.ipynb", as_version=4).cells)
    assert "latency_section(" in source and "profile_md(" in source and "verify < 1.2" not in source
    from helpers.report import nb06_latency
    assert "verify_bound(" in (ROOT / "helpers" / "report" / "nb06_latency.py").read_text()   # profile_md uses it
    assert callable(nb06_latency.profile_md)
