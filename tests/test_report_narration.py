"""The helpers notebooks 00-05 call instead of building tables and sentences in their cells: each on small inputs,
checked by value."""

import math

import pytest
import torch

from helpers.report import nb01_data as codec_levels, nb03_tree as tree_tables, nb05_quality as paired_per, plots
from helpers.report.nb01_data import built_on, held_out_words
from helpers.report.nb02_drafters import gap_share_sentence, offsets_logit_bias, translation_sentence
from helpers.report.nb05_quality import recogniser_line
from helpers.report.nb08_report import REPORT_NOTEBOOK, wall_time_line
from helpers.report.nb08_summary import language_lead
from helpers.report.quality_parity import silent_wer_sentence


def _lang(per_gt, per_codec, ar, spec, frames_ar=30, frames_spec=30, wer_codec=None):
    return {"per_gt": per_gt, "per_codec": per_codec, "wer_codec": wer_codec, "per_ar_utterances": ar,
            "per_spec_utterances": spec, "frames_ar": frames_ar, "frames_spec": frames_spec}


SECTION = {"en": _lang(0.2, 0.3, [[0.6, 0.7, 0.8], [0.6, 0.7, 0.8]], [[0.6, 0.7, 0.8], [0.6, 0.7, 0.8]],
                       wer_codec=0.9),
           "de": _lang(0.1, 0.3, [[0.4, 0.5, 0.6]], [[0.5, 0.5, 0.7]], frames_ar=27, frames_spec=33),
           "fr": {"per_gt": 0.1, "per_codec": 0.2, "wer_codec": 0.1, "frames_ar": 30, "frames_spec": 30}}


def test_paired_rows_pair_each_utterance_and_skip_languages_without_them():
    rows = paired_per.paired_rows(SECTION, ["en", "de", "fr"])
    assert [r["language"] for r in rows] == ["en", "de"]                  # fr: no per-utterance scores
    en, de = rows
    assert en["utterances"] == 3 and en["spec - AR"] == 0 and en["paired p"] == 1.0
    assert de["PER AR, utterance mean"] == pytest.approx(0.5) and de["spec - AR"] == pytest.approx(0.2 / 3)
    text = paired_per.paired_summary(rows)
    assert "averaged over 2 languages" in text and "0 of 2 languages" in text and "about 0.1 would" in text
    assert "3 utterances per language" in text and "(de)" in text       # de's differences vary: the widest power
    with pytest.raises(ValueError):
        paired_per.paired_summary([])


def test_the_wer_is_said_silent_only_where_the_codec_round_trip_scores_above_the_limit():
    text = silent_wer_sentence(SECTION, ["en", "de", "fr"])
    assert text.startswith("**The WER columns carry no signal** for en:") and "90%" in text
    assert silent_wer_sentence(SECTION, ["de", "fr"]) is None


def test_frame_counts_name_the_languages_whose_runs_stopped_elsewhere():
    text = paired_per.frame_count_sentence(SECTION, {"en": 10, "de": 10, "fr": 10}, seeds=3)
    assert "de, 3 x 10 = 30 expected, AR 27 (3 fewer: a run stopped early), speculative 33 (3 more" in text
    assert "en," not in text and "fr," not in text
    same = paired_per.frame_count_sentence(SECTION, {"en": 10, "fr": 10}, seeds=3)
    assert "every run of every language has its utterance's evaluation length" in same


def test_the_codec_level_table_shows_bits_and_the_codebook_size_as_v():
    levels = [{"level": 0, "size": 8, "usage": 0.5, "H": 2.0, "H_given_lower": None, "H_given_previous_frame": 1.0},
              {"level": 1, "size": 4, "usage": 1.0, "H": 2.0, "H_given_lower": 1.5, "H_given_previous_frame": 1.0}]
    table = codec_levels.level_table(levels, [math.log(2), 2 * math.log(2)], [1.0, 0.5, 0.25])
    assert table[1]["V (codebook size)"] == 4 and "K" not in table[1]
    assert table[1]["model CE given all it sees"] == pytest.approx(2.0) and table[1]["log-mel error with c0..c_k"] == 0.25
    assert "model CE given all it sees" not in codec_levels.level_table(levels)[0]
    assert codec_levels.level_gains(levels) == {"lower": pytest.approx(0.25), "previous frame": pytest.approx(0.5)}
    with pytest.raises(ValueError):
        codec_levels.level_gains(levels[:1])


def test_the_round_trip_rows_and_sentence_follow_the_means():
    by_level = {"levels": [1, 2, 16], "per": {"en": [0.3, 0.5, 0.31]}, "mean": [0.3, 0.5, 0.31]}
    rows = codec_levels.round_trip_rows(by_level)
    assert [r["levels decoded"] for r in rows] == ["c0", "c0..c1", "c0..c15"] and rows[1]["en"] == 0.5
    text = codec_levels.round_trip_sentence(by_level)
    assert "mean PER of 0.300, all 16 levels 0.310: they add nothing" in text and "0.500 with 2 levels" in text
    better = codec_levels.round_trip_sentence({"levels": [1, 16], "per": {}, "mean": [0.5, 0.3]})
    assert "phonetic detail" in better and "worse than either end" not in better


def test_held_out_words_say_both_phases_and_the_kept_step():
    training = {"talker_loss": [0] * 100, "predictor_phase_loss": [0] * 50, "predictor_best_step": 20,
                "validation": [{"step": 0, "phase": "joint", "predictor": 3.0, "talker": 4.0},
                               {"step": 100, "phase": "joint", "predictor": 2.0, "talker": 3.0},
                               {"step": 20, "phase": "predictor", "predictor": 1.5, "talker": 3.0},
                               {"step": 40, "phase": "predictor", "predictor": 1.7, "talker": 3.0}]}
    text = held_out_words(training)
    assert "joint phase (100 steps): fell from 3.000 to 2.000" in text
    assert "code-predictor phase (50 steps" in text and "step 20's (1.500)" in text
    assert held_out_words({"validation": []}) is None


def test_a_build_duration_names_the_kernels_it_was_built_with():
    assert "ATen kernels AVX2, OpenBLAS Haswell" in built_on({"aten": "AVX2", "openblas": ["Haswell"]})
    assert "not recorded" in built_on(None)


def test_the_recogniser_line_says_where_its_seconds_come_from():
    rec = {"parameters": 12345, "clips": 100, "seconds": 129.1, "cpu_seconds": 250.0, "threads": 2,
           "loss": [3.0, 1.0], "val_per": [0.5, 0.2]}
    text = recogniser_line(rec, "on X")
    assert "12,345 parameters" in text and "in 129 s (250 s CPU, 2 thread(s); on X)" in text
    assert "held-out PER 20.0% after 2 epochs" in text


def test_node_tokens_come_from_depth_and_rank_only():
    drafts = torch.tensor([[5, 6], [7, 8]], device="cpu")
    rows = tree_tables.node_token_rows([(0,), (1,), (0, 0), (1, 0)], drafts)
    assert [r["token"] for r in rows] == [5, 6, 7, 7] and rows[3]["parent"] == "(1,)"
    assert [r["node"] for r in tree_tables.shared_slots(rows)] == [3, 4]
    assert tree_tables.shared_slots(rows[:3]) == []


def test_the_ideal_drafter_sentence_names_where_a_drafter_exceeds_it():
    curves = {"offsets": [[0.5, 0.1], [0.3, 0.1]], "ideal drafter": [[0.6, 0.1], [0.25, 0.1]]}
    rows = tree_tables.top1_rows(curves, [1.0, 0.9], depth=2)
    assert rows[1] == {"depth": 2, "offsets": 0.3, "ideal drafter": 0.25, "mass covered": 0.9}
    text = tree_tables.ideal_drafter_sentence(rows, ["offsets"], 10, 100)
    assert "at depth 2 offsets exceeds the ideal drafter's top-1 (0.300 vs 0.250" in text and "covering 0.90" in text
    assert "depth 1" not in text and "10 ideal-drafter frames against 100" in text
    assert "no trained drafter exceeds" in tree_tables.ideal_drafter_sentence(rows[:1], ["offsets"], 10, 100)


def test_the_two_per_depth_tables_say_what_they_measure_and_why_they_differ():
    from helpers.method.diagnostics import DraftScores

    def scores(acc, frames):                             # [depth] mean acceptance, the same at every start t
        t = torch.tensor([acc, acc], dtype=torch.float64, device="cpu")
        return DraftScores(t, t, frames)
    s = {"own": scores([0.5, 0.5], 100), "offsets": scores([0.31, 0.22], 100), "ideal": scores([0.48, 0.47], 10),
         "own_ideal_frames": scores([0.55, 0.54], 10)}
    rows = tree_tables.top1_rows({"offsets": [[0.30, 0.1], [0.24, 0.1]], "ideal drafter": [[0.45, 0.1], [0.43, 0.1]]},
                                 [1.0, 0.97], depth=2)
    head = tree_tables.top1_heading(100, 10)
    assert "the code the code predictor then sampled" in head and "100 free-running calibration frames" in head
    assert "whether or not the shallower drafts matched" in head and "on 10 of those frames" in head
    head = tree_tables.acceptance_heading(s)
    assert "given the true earlier codes" in head and "100 teacher-forced validation frames" in head
    assert "the ideal drafter only on 10 of them" in head
    assert "ideal drafter" not in tree_tables.acceptance_heading({"own": s["own"]})
    text = tree_tables.tables_differ_sentence(rows, s)
    assert "Neither per-depth table is conditional on the parent being accepted" in text
    assert "agree within 0.020 at every depth" in text                    # offsets: |0.24 - 0.22|
    assert "differ from those above by +0.03 to +0.04" in text and "accepts 0.54-0.55 against 0.50-0.50 on all 100" in text
    assert "ideal" not in tree_tables.tables_differ_sentence(rows, {k: s[k] for k in ("own", "offsets")})


def test_the_gap_share_and_translation_sentences():
    v = {"reused": [[0.2], [0.1]], "offsets": [[0.3], [0.1]], "medusa": [[0.4], [0.3]]}
    text = gap_share_sentence(v)
    assert "depth 1: reused 0.200, offsets 0.300, Medusa 0.400 (50% of the gap)" in text and "(0% of the gap)" in text
    assert gap_share_sentence({"reused": v["reused"]}) is None

    class Shares:
        def __init__(self, shared, systematic):
            self.shared_share, self.systematic_share = torch.tensor(shared, device="cpu"), torch.tensor(systematic, device="cpu")
    text = translation_sentence({"normed": Shares([0.1, 0.2], [0.5, 0.6]), "prenorm": Shares([0.9, 0.8], [1.0, 1.0])})
    assert "after the final norm: j=1 10.0%, j=2 20.0%; before it: j=1 90.0%, j=2 80.0%" in text
    assert "after the norm: j=1 50.0%, j=2 60.0%" in text


def test_offsets_are_a_logit_bias_and_a_broken_drafter_is_refused():
    from helpers.method.drafters import make_drafter
    from helpers.report.nb00_overview import toy_decoder
    predictor = toy_decoder(seed=0).predictor
    drafter = make_drafter("offsets", predictor, 2)
    with torch.no_grad():
        drafter.b.copy_(torch.randn(drafter.b.shape, generator=torch.Generator().manual_seed(1), dtype=drafter.b.dtype,
                                    device="cpu").to(drafter.b.device))
    h1 = torch.randn(3, predictor.hidden_size, generator=torch.Generator().manual_seed(2), dtype=torch.float64,
                     device="cpu")
    bias = offsets_logit_bias(drafter, predictor, h1.to(predictor.device))
    with torch.no_grad():
        expected = [float((drafter.head_weight(1, j) @ drafter.b[j - 1]).abs().max()) for j in (1, 2)]
    assert bias == pytest.approx(expected) and min(bias) > 0
    drafter.draft_logits = lambda h, t: torch.zeros(h.shape[0], 2, predictor.vocab_size, dtype=h.dtype, device=h.device)
    with pytest.raises(AssertionError, match="not the reused heads' plus"):
        offsets_logit_bias(drafter, predictor, h1.to(predictor.device))


def test_the_offsets_lead_is_said_language_by_language():
    text = language_lead({"en": 2.05, "de": 2.00}, {"en": 2.00, "de": 2.01})
    assert text == (", and the offsets lead the reused heads in 1 of 2 languages (margins -0.010 to +0.050; no "
                    "run-to-run spread was measured)")
    assert language_lead(None, {"en": 2.0}) == "" and language_lead({"en": 2.0}, {"de": 2.0}) == ""


def test_the_report_leaves_out_its_own_wall_time():
    line = wall_time_line({"00_overview": 10.9, REPORT_NOTEBOOK: 5.2})
    assert "00_overview 10.9" in line and "5.2" not in line and f"{REPORT_NOTEBOOK}, which writes" in line
    untimed = "Wall time per notebook: not recorded (the notebooks ran outside the runner, `python -m helpers`)."
    assert wall_time_line({}) == wall_time_line({REPORT_NOTEBOOK: 5.2}) == untimed      # run in JupyterLab


def test_expected_lines_differ_in_style_and_measured_points_are_hollow():
    ns = [4, 8, 16]
    fig = plots.tokens_vs_tree_size({k: {n: 2.0 for n in ns} for k in ("a", "b", "c")}, {"a": {8: 2.1}})
    lines = fig.axes[0].get_lines()
    expected = [ln for ln in lines if ln.get_label().endswith(": expected")]
    assert len(expected) == 3 and len({(str(ln.get_linestyle()), ln.get_marker()) for ln in expected}) == 3
    assert expected[0].get_linewidth() > expected[1].get_linewidth() > expected[2].get_linewidth()
    assert any(ln.get_label() == "a: measured (evaluation frames)" for ln in lines)
    plots.plt.close(fig)


def test_the_acceptance_panels_hold_every_point_and_the_y_label_is_given():
    from types import SimpleNamespace
    acc = torch.full((14, 2), 0.2, dtype=torch.float64, device="cpu")
    acc[3, 1], acc[13, 1] = 0.63, float("nan")
    diag = SimpleNamespace(depth=2, scores={"own": SimpleNamespace(acceptance=acc * 0 + 0.3, frames=5),
                                            "ideal": SimpleNamespace(acceptance=acc, frames=2)})
    fig = plots.draft_acceptance_by_position(diag)
    assert all(ax.get_ylim()[1] >= 0.63 for ax in fig.axes[:2])
    plots.plt.close(fig)
    fig = plots.topm_accuracy({"x": [[0.5, 0.2]]}, "t", ylabel="acceptance")
    assert fig.axes[0].get_ylabel() == "acceptance"
    plots.plt.close(fig)


def test_build_rows_say_which_machine_measured_each_step():
    from helpers.report.nb01_data import HERE, build_rows
    rows = build_rows({"speech": 43.1, "codec": 19.2, "model": None}, ["codec", "model"], "on X")
    assert rows == [{"build step": "speech", "seconds": 43.1, "measured": HERE},
                    {"build step": "codec", "seconds": 19.2, "measured": "on X"},
                    {"build step": "model", "seconds": None, "measured": "on X"}]


def test_the_coreml_rows_and_metrics_hold_every_package():
    from types import SimpleNamespace

    from helpers.report.nb07_coreml import coreml_metrics, coreml_rows
    report = SimpleNamespace(packages=[SimpleNamespace(name="ar_fp16", q=1, size_mb=1.5, max_abs_err=None),
                                       SimpleNamespace(name="fused_n8_w8a16", q=9, size_mb=0.8, max_abs_err={"x": 0.1})])
    assert coreml_rows(report)[1] == {"package": "fused_n8_w8a16", "q": 9, "size MB": 0.8,
                                      "max abs error vs PyTorch": {"x": 0.1}}
    assert coreml_metrics(report, "Linux", 8) == {"ar_fp16": {"size_mb": 1.5, "q": 1, "max_abs_err": None},
                                                 "fused_n8_w8a16": {"size_mb": 0.8, "q": 9, "max_abs_err": {"x": 0.1}},
                                                 "system": "Linux", "tree_size": 8}


def test_a_one_seed_wer_and_a_silent_asr_are_said_under_table_3():
    from helpers.report.nb08_report import wer_caveats

    text = wer_caveats({"en": {"wer_ar_per_seed": [0.91], "wer_codec": 0.90},
                        "de": {"wer_ar_per_seed": [], "wer_codec": None}})[1]
    assert "WER in en comes from one seed" in text and "carry no signal** for en:" in text and "for en, de" not in text
    assert wer_caveats({"de": {"wer_ar_per_seed": [0.2, 0.3], "wer_codec": 0.3}}) == []
