"""The pre-flight (helpers.experiment.preflight) on the tiny checkpoint, Whisper and local datasets: it passes, and
refuses a missing source, a wrong config name, a CUDA build the driver cannot run and a full disk, each saying what
to do; the runner opens a qwen3 run with it."""

import io

import pytest
import torch
import yaml

from helpers.experiment.preflight import checks, preflight
from helpers.experiment.preflight.check import PreflightError
from helpers.experiment.preflight.cuda import check_cuda
from helpers.experiment.preflight.models import find_model
from helpers.experiment.run.runner import main
from qwen3_tiny import build_tiny_datasets, build_tiny_tts, build_tiny_whisper, tiny_params


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """The tiny stand-ins (seconds to build): checkpoint, Whisper, datasets."""
    root = tmp_path_factory.mktemp("preflight")
    return dict(tts=build_tiny_tts(root / "tts"), whisper=build_tiny_whisper(root / "whisper"),
                **build_tiny_datasets(root / "data"))


def by_name(P) -> dict:
    return {c.name: c for c in checks(P)}


def test_passes_on_the_local_datasets(paths):
    out = io.StringIO()
    assert preflight(tiny_params(paths), out) == 0, out.getvalue()
    text = out.getvalue()
    for name in ("cuda", "model", "asr", "data voxpopuli en", "data librispeech clean", "data fleurs en_us",
                 "data fleurs ja_jp", "disk", "memory"):
        assert f"  {name} " in text
    assert "FAILED" not in text and "pre-flight ok" in text
    assert "decodes" in by_name(tiny_params(paths))["data fleurs ja_jp"].detail


def test_the_parquet_conversion_layout_passes(paths):
    P = tiny_params(paths, fleurs_id=str(paths["fleurs_parquet_conversion"]), fleurs_data_dir="{config}")
    assert by_name(P)["data fleurs en_us"].status == "ok"


def test_a_missing_source_is_refused(paths, tmp_path):
    found = by_name(tiny_params(paths, librispeech_id=str(tmp_path / "nowhere")))
    c = found["data librispeech clean"]
    assert c.failed and "no such folder" in c.detail and "give an existing folder" in c.detail
    assert found["data voxpopuli en"].status == "ok"


def test_a_wrong_config_name_is_refused(paths):
    c = by_name(tiny_params(paths, voxpopuli_config="xx"))["data voxpopuli xx"]
    assert c.failed and "'xx' not found" in c.detail and "voxpopuli_config" in c.detail


def test_a_cuda_build_newer_than_the_driver_is_refused(monkeypatch, paths):
    import helpers.backends.qwen3.backend as qwen3

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(qwen3, "driver_cuda_version", lambda: "12.4")
    with pytest.raises(PreflightError, match=r"CUDA 12.4, older than the CUDA 13.0.*R580 or newer.*cu124"):
        check_cuda(tiny_params(paths, device="cuda"))
    assert by_name(tiny_params(paths, device="cuda"))["cuda"].failed
    assert "no CUDA needed" in check_cuda(tiny_params(paths))


def test_a_model_folder_without_config_and_an_offline_hub_id_are_refused(monkeypatch, tmp_path):
    with pytest.raises(PreflightError, match="no config.json"):
        find_model(str(tmp_path), "model_id_or_path", "tts")
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PreflightError, match="HF_HUB_OFFLINE is set.*local folder"):
        find_model("nobody-here/no-such-model", "whisper_id", "asr")


def test_a_full_disk_is_refused(monkeypatch, paths):
    from helpers.experiment.preflight import resources

    monkeypatch.setattr(resources, "free_disk", lambda path: (1000, 1))
    c = by_name(tiny_params(paths))["disk"]
    assert c.failed and "has 1000 B free" in c.detail and "output_dir" in c.detail


def test_the_runner_checks_alone_and_opens_a_qwen3_run_with_it(monkeypatch, paths, tmp_path):
    import papermill

    def write(**overrides):
        file = tmp_path / f"p{len(overrides)}.yaml"
        file.write_text(yaml.safe_dump(tiny_params(paths, **overrides).to_dict()))
        return str(file)

    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a notebook ran"))
    assert main([write(), "--check"]) == 0
    assert main([write(voxpopuli_config="xx"), "--only", "01"]) == 1          # refused before its first notebook


def test_the_mini_backend_has_nothing_to_check():
    from helpers.experiment.run.params import RunParams

    out = io.StringIO()
    assert list(checks(RunParams())) == [] and preflight(RunParams(), out) == 0 and "nothing to check" in out.getvalue()
