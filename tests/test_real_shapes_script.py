"""scripts/real_shapes.py end to end on a scaled-down copy of the real checkpoint's configuration files (the real
token and codec ids, the real text vocabulary; small widths and depths): build through the official classes, load,
the data stage, teacher forcing, training, calibration, AR and speculative synthesis with identical codes, decode."""

import json
import subprocess
import sys

from helpers.experiment.params import REPO_ROOT

CONFIGS = REPO_ROOT / "scripts" / "data" / "qwen3_tts_0.6b_customvoice"
SMALL = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8)


def _scaled_configs(folder):
    """The three configuration files with every width and depth small and every id as it is."""
    folder.mkdir()
    cfg = json.loads((CONFIGS / "config.json").read_text())
    talker = cfg["talker_config"]
    talker.update(SMALL, num_hidden_layers=1, text_hidden_size=16)
    talker["rope_scaling"]["mrope_section"] = [2, 1, 1]                     # sums to head_dim / 2
    predictor = talker["code_predictor_config"]
    predictor.update(SMALL, num_hidden_layers=2, layer_types=["full_attention"] * 2)
    (folder / "config.json").write_text(json.dumps(cfg))
    speech = json.loads((CONFIGS / "speech_tokenizer_config.json").read_text())
    speech["encoder_config"].update(hidden_size=16, num_filters=4, num_hidden_layers=1, intermediate_size=32,
                                    num_attention_heads=2, num_key_value_heads=2, head_dim=8, codebook_dim=8,
                                    vector_quantization_hidden_dimension=8, upsample_groups=16)
    speech["decoder_config"].update(hidden_size=16, latent_dim=16, codebook_dim=16, num_attention_heads=2,
                                    num_key_value_heads=2, head_dim=8, intermediate_size=32, num_hidden_layers=1,
                                    decoder_dim=32, vector_quantization_hidden_dimension=8)
    (folder / "speech_tokenizer_config.json").write_text(json.dumps(speech))
    (folder / "generation_config.json").write_text((CONFIGS / "generation_config.json").read_text())
    return folder


def test_the_real_shapes_script_runs_every_stage_on_scaled_configs(tmp_path):
    configs = _scaled_configs(tmp_path / "configs")
    result = subprocess.run([sys.executable, "scripts/real_shapes.py", "--configs", str(configs), "--frames", "3",
                             "--threads", "1", "--keep", str(tmp_path / "work")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "FAILED" not in result.stdout and "identical: True" in result.stdout
    assert "tree size 16" in result.stdout
