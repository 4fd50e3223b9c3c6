"""metrics.json's completeness check (notebook 08): required keys, and losslessness as the run's mode demands."""

from helpers.experiment.run.metrics import required_keys, run_problems
from helpers.experiment.run.params import RunParams


def complete(P: RunParams, lossless: dict) -> dict:
    """A metrics document with every required key (value 0), then the given lossless section."""
    metrics: dict = {}
    for key in required_keys(P):
        node = metrics
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = 0
    metrics["lossless"] = lossless
    return metrics


def test_exact_mode_needs_every_frame_identical():
    P = RunParams()
    ok = dict(frames_compared=10, frames_identical=10, identical_fraction=1.0, exact=True, replay_mismatched=0,
              parity={"p_min_adjusted": 1.0, "rejected": False})
    assert run_problems(P, complete(P, ok)) == []
    assert "only 9 of 10" in run_problems(P, complete(P, {**ok, "frames_identical": 9}))[0]
    assert "replay differs" in run_problems(P, complete(P, {**ok, "replay_mismatched": 2}))[0]


def test_independent_stream_parity_must_hold_and_its_control_must_reject():
    P = RunParams()
    ok = dict(frames_compared=10, frames_identical=10, identical_fraction=1.0, exact=True, replay_mismatched=0,
              parity={"p_min_adjusted": 1.0, "rejected": False})
    m = complete(P, ok)
    m["parity"] = {"p_min_adjusted": 0.5, "rejected": False, "control_temperature": 1.2,
                   "control": {"p_min_adjusted": 1e-12, "rejected": True}}
    assert run_problems(P, m) == []
    m["parity"].update(p_min_adjusted=1e-6, rejected=True)
    assert "parity test rejects" in run_problems(P, m)[0]
    m["parity"].update(p_min_adjusted=0.5, rejected=False, control={"p_min_adjusted": 0.3, "rejected": False})
    assert "control (temperature 1.2) is not rejected" in run_problems(P, m)[0]


def test_deployment_mode_needs_parity_and_a_missing_key_is_named():
    P = RunParams(inner_loop_dtype="float32")
    lossless = dict(frames_compared=10, frames_identical=7, identical_fraction=0.7, exact=False, replay_mismatched=3,
                    parity={"p_min_adjusted": 0.4, "rejected": False})
    assert run_problems(P, complete(P, lossless)) == []
    rejected = {**lossless, "parity": {"p_min_adjusted": 1e-9, "rejected": True}}
    assert "parity test rejects" in run_problems(P, complete(P, rejected))[0]
    m = complete(P, lossless)
    del m["data"]
    assert run_problems(P, m) == ["metrics.json lacks data.table"]


def test_a_section_with_int_keys_merges_into_what_an_earlier_run_wrote(tmp_path):
    """A notebook run twice: its tree sizes are ints in memory and strings in the file; they merge as one key."""
    import json

    from helpers.experiment.run.metrics import update_metrics
    P = RunParams(output_dir=str(tmp_path), run_name="twice")
    update_metrics(P, {"latency": {"cpu": {4: {"overhead": 0.5}, 16: {"overhead": 0.9}}}})
    merged = update_metrics(P, {"latency": {"cpu": {4: {"overhead": 0.4}}, "by": [{8: 1}]}})
    assert merged["latency"]["cpu"] == {"4": {"overhead": 0.4}, "16": {"overhead": 0.9}}
    assert merged["latency"]["by"] == [{"8": 1}]
    assert json.loads((tmp_path / "twice" / "metrics.json").read_text()) == merged


def test_notebooks_run_outside_the_runner_have_no_wall_times_to_lack():
    """The runner times each notebook (run.wall_s); a run whose notebooks were run in JupyterLab (run.runner false,
    written by `setup`) has none, and notebook 08 does not ask for them; a runner's run still must have them."""
    P = RunParams()
    lossless = dict(frames_compared=10, frames_identical=10, identical_fraction=1.0, exact=True, replay_mismatched=0,
                    parity={"p_min_adjusted": 1.0, "rejected": False})
    m = complete(P, lossless)
    del m["run"]["wall_s"]
    assert run_problems(P, m) == ["metrics.json lacks run.wall_s"]
    m["run"]["runner"] = True
    assert run_problems(P, m) == ["metrics.json lacks run.wall_s"]
    m["run"]["runner"] = False
    assert run_problems(P, m) == []
    del m["run"]["device"]
    assert run_problems(P, m) == ["metrics.json lacks run.device"]
