"""Core ML export: the AR call and the fused call convert to mlprogram packages, fp16 and W8A16.

On Linux only conversion runs (prediction needs macOS); on macOS the packages are also run and
compared with PyTorch.
"""

import platform

import pytest
import torch

from helpers.method.predictor import CodePredictor
from helpers.measure.coreml_export import export_calls
from helpers.method.drafters import PositionOffsets, PreNormOffsets
from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker
from helpers.method.tree import SparseTree

SPEC = TinyTalkerSpec(hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=8, vocab_size=32,
                      talker_hidden_size=24)


@pytest.mark.parametrize("offsets", [PositionOffsets, PreNormOffsets])
def test_export_both_calls_fp16_and_w8a16(tmp_path, offsets):
    pytest.importorskip("coremltools")
    cp = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float32))
    drafter = offsets(cp, offsets=0.1 * torch.randn(3, SPEC.hidden_size))
    tree = SparseTree.full(2, 3)
    report = export_calls(cp, drafter, tree, tmp_path / "coreml")
    names = [p.name for p in report.packages]
    assert names == ["ar_fp16", "ar_w8a16", "fused_n14_fp16", "fused_n14_w8a16"]
    for p in report.packages:
        assert p.path.endswith(".mlpackage") and p.size_mb > 0 and (tmp_path / "coreml" / f"{p.name}.mlpackage").is_dir()
    sizes = {p.name: p.size_mb for p in report.packages}
    assert sizes["fused_n14_w8a16"] < sizes["fused_n14_fp16"]
    assert report.packages[2].outputs == ("logits", "k_new", "v_new", "drafts") and report.packages[2].q == 15
    assert sorted(x.name for x in (tmp_path / "coreml").iterdir()) == sorted(f"{n}.mlpackage" for n in names)
    if platform.system() == "Darwin":
        assert report.predicted
        for p in report.packages:
            assert p.max_abs_err["logits"] < (0.05 if "fp16" in p.name else 0.5)
    else:
        assert not report.predicted and "macOS" in report.note


def test_export_refuses_non_float32_models(tmp_path):
    pytest.importorskip("coremltools")
    cp = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float64))
    with pytest.raises(ValueError, match="float32"):
        export_calls(cp, PositionOffsets(cp), SparseTree.chain(2), tmp_path)


def test_coremltools_text_bars_are_dropped_and_other_stderr_kept(capsys):
    """coremltools draws a tqdm text bar per conversion pass on stderr (a JupyterLab kernel would show them in red):
    `text_bars_dropped` drops those lines, a finished one without a percentage included, and writes on the rest."""
    import sys

    from tqdm import tqdm

    from helpers.measure.coreml_export import text_bars_dropped
    with text_bars_dropped():
        for _ in tqdm(range(3), desc="Running MIL default pipeline", unit=" passes"):
            pass
        for _ in tqdm([], desc="Running MIL frontend_milinternal pipeline", unit=" passes"):     # "0 passes [00:00, ?"
            pass
        print("a warning that is no bar", file=sys.stderr)
    assert capsys.readouterr().err == "a warning that is no bar\n"
