"""The `cuda_graph` run parameter: on by default where the timed model is on CUDA, off elsewhere, refused on a CPU."""

import pytest

from helpers.experiment.run.params import ParamsError, RunParams, load_params


def test_auto_is_on_on_cuda_and_off_elsewhere():
    P = RunParams()
    assert P.cuda_graph == "auto"
    assert P.graphs_on("cuda") and not P.graphs_on("cpu")
    assert P.compiled_mode("cuda") == "cuda_graph" and P.compiled_mode("cpu") == "none"


def test_off_and_explicit_compile():
    assert not RunParams(cuda_graph="off").graphs_on("cuda")
    assert RunParams(cuda_graph="off").compiled_mode("cuda") == "none"
    assert RunParams(compile="inductor").compiled_mode("cuda") == "inductor"
    assert RunParams(compile="inductor").compiled_mode("cpu") == "inductor"
    assert RunParams(device="cuda", cuda_graph="on").graphs_on("cuda")


def test_bad_values_are_refused_with_what_is_allowed():
    with pytest.raises(ParamsError, match=r"cuda_graph='yes' is not allowed; allowed: auto, on, off"):
        RunParams(cuda_graph="yes")
    with pytest.raises(ParamsError, match=r"cuda_graph='on' needs device cuda"):
        load_params("params/smoke.yaml", {"cuda_graph": "on", "device": "cpu"})
    P = RunParams(device="auto", cuda_graph="on")             # accepted before the device is known ...
    with pytest.raises(ParamsError, match=r"needs the timed model on CUDA, it is on 'cpu'"):
        P.graphs_on("cpu")                                    # ... refused once it resolves to the CPU
