"""The notebooks' stages on the qwen3 backend (tiny saved checkpoint, local datasets, tiny Whisper): the same
entry points the real run uses, from teacher forcing to WER, with AR == speculative over whole utterances."""

import pytest
import torch

from helpers.experiment.stages import stages
from helpers.experiment.stages.quality import quality
from helpers.experiment.stages.stage_cache import clear_caches
from qwen3_tiny import tiny_params


@pytest.fixture(scope="module")
def P(qwen3_tiny, tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_params(qwen3_tiny, output_dir=str(tmp_path_factory.mktemp("outputs")), wer_seeds=1, ceiling_frames=2)
    torch.set_num_threads(threads)


def test_stages_run_end_to_end_on_the_qwen3_backend(P):
    b = stages.backend(P)
    assert b.name == "qwen3" and list(b.languages) == ["en", "ja"]
    g, h, codes = stages.teacher_forced(P, "train")
    assert g.shape[0] == h.shape[0] == codes.shape[0] and h.shape[1:] == (15, b.predictor.hidden_size)
    trained = stages.drafters(P, progress=False)
    assert set(trained.drafters) == {"reused", "medusa", "offsets", "offsets_prenorm"}
    assert trained.loss_history["offsets"] and trained.loss_history["offsets_prenorm"]
    cal = stages.calibration(P)
    assert cal.trees["offsets"][16].size == 16 and cal.expected["offsets"][16] > 1.0
    choice = stages.main_drafter_choice(P)          # the offset variant with more expected tokens/step (calibration)
    assert choice["name"] == max(("offsets", "offsets_prenorm"), key=lambda k: cal.expected[k][P.tree_size])
    ev = stages.evaluation(P)
    assert ev.frames_compared > 0 and ev.frames_identical == ev.frames_compared
    assert set(stages.per_language(ev, stages.backend(P).frames_per_second)) == {"en", "ja"}
    assert all(1.0 <= v <= 15.0 for by_n in ev.replay.values() for v in by_n.values())
    wer = quality(P)
    assert set(wer["languages"]) == {"en", "ja"}
    for row in wer["languages"].values():                 # AR and speculative from independent streams
        assert len(row["wer_ar"]) == len(row["wer_spec"]) == 1 and row["per_ar"] == [] and row["per_gt"] is None
        assert row["frames_ar"] > 0 and row["frames_spec"] > 0 and 0.0 <= row["parity_p"] <= 1.0
    assert len(wer["parity"]["p_values"]) == len(wer["control"]["design_effect"]) == 16


def test_drafters_trained_in_two_workers_equal_those_trained_in_this_process(P):
    """The drafter stage's jobs (one per kind and learning rate) give the same weights and training records in
    spawned workers as here, tensor for tensor: the kept drafters do not depend on how many processes train them."""
    import dataclasses

    from helpers.experiment.run.pool import run_jobs
    stages.teacher_forced(P, "train"), stages.teacher_forced(P, "validation")
    jobs = [stages.DrafterJob("medusa", 1e-3), stages.DrafterJob("offsets_prenorm", 3e-3)]
    here = run_jobs(dataclasses.replace(P, workers=1), stages.drafter_job, jobs)
    spawned = run_jobs(dataclasses.replace(P, workers=2), stages.drafter_job, jobs)
    for (weights, result), (weights2, result2) in zip(here, spawned):
        assert weights.keys() == weights2.keys() and result == result2 and result.best_epoch > 0
        for name in weights:
            assert torch.equal(weights[name], weights2[name]), name


def test_stage_artifacts_are_reused(P):
    folders = sorted(p.name for p in (P.run_dir / "artifacts").iterdir())
    assert [f.split("-")[0] for f in folders] == ["calibration", "data", "data", "drafters", "evaluation"] + [
        "samples"] * 4 + ["states"] * 4 + ["syntheses", "wer"]     # states: h and r of the train and validation roles
    clear_caches("stages")
    before = {p: p.stat().st_mtime for p in (P.run_dir / "artifacts").rglob("*") if p.is_file()}
    stages.evaluation(P)                                                   # loaded from disk, nothing rebuilt
    after = {p: p.stat().st_mtime for p in (P.run_dir / "artifacts").rglob("*") if p.is_file()}
    assert before == after


def test_a_second_process_reads_the_saved_samples_not_the_datasets(P, qwen3_tiny, tmp_path):
    """With every dataset folder moved away and the process's caches empty (a new notebook), the stages still load:
    the samples come from the data stage's artifacts, equal to what the backend encoded."""
    first = {role: stages.samples(P, role) for role in ("train", "validation", "calibration", "evaluation")}
    table = stages.dataset_table(P)
    moved = {k: tmp_path / k for k in ("voxpopuli", "librispeech", "fleurs")}
    for k, dest in moved.items():
        qwen3_tiny[k].rename(dest)
    try:
        clear_caches("stages", "backend")
        with pytest.raises(Exception):
            stages.backend(P).samples("train")                              # the datasets are really gone
        for role, rows in first.items():
            again = stages.samples(P, role)
            assert [(s.id, s.lang, s.text, s.speaker, s.seconds) for s in again] == [
                (s.id, s.lang, s.text, s.speaker, s.seconds) for s in rows]
            assert all(torch.equal(a.codes, b.codes) and torch.equal(a.input_ids, b.input_ids)
                       for a, b in zip(again, rows))
        assert stages.dataset_table(P) == table
        g, _, codes = stages.teacher_forced(P, "train")
        assert g.shape[0] == codes.shape[0] > 0
        assert stages.evaluation(P).frames_identical > 0
    finally:
        for k, dest in moved.items():
            dest.rename(qwen3_tiny[k])
