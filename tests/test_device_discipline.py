"""Every tensor knows its device: the paths the notebooks, scripts and shards run, with the model off the CPU.

The model sits on `device_check.DEVICE` ("lazy" by default: PyTorch's lazy backend under `StrictDevices`, so a
tensor made without a device or made on the CPU that meets a model tensor raises here on a CPU-only machine;
RVQ_TEST_DEVICE=cuda runs the same tests on a GPU). Sizes are tiny (a few frames): these tests check where
tensors live, the other test files check what they hold. Results are compared with a CPU run where cheap.
"""

import gc

import pytest
import torch

from device_check import DEVICE, backend_device_check, device_check, mix_errors
from drafting import TREES, random_drafters
from helpers.adapter.tiny import build_tiny_talker
from helpers.method.calibration import acceptance_table, uncapped_table
from helpers.method.ceiling import ceiling_mean, ceiling_sums
from helpers.method.diagnostics import diagnostics
from helpers.method.decoding import Decoder
from helpers.method.drafters import make_drafter
from helpers.method.stack import FusedCore
from helpers.method.predictor import CodePredictor
from helpers.method.replay import replay_calls
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.method.training import TeacherForcedHidden, TrainConfig, train_drafter
from helpers.report.nb00_overview import frame_walkthrough
from conftest import SPECS, frame_inputs

FRAMES = 3                       # free-running frames per synthesis on the qwen3 backend
SAMPLER = SamplerConfig()


SPEC = SPECS["h64"]              # the smaller tiny shape: the lazy backend compiles every new graph


def _frames(n, seed=0):
    return frame_inputs(SPEC, n, seed)


@pytest.fixture
def talker():
    """A fresh tiny talker in float64, per test (device_check moves it)."""
    return build_tiny_talker(SPEC, seed=1, dtype=torch.float64)


@pytest.fixture
def short(monkeypatch):
    """Caps free-running synthesis of a backend at FRAMES frames (the code path is the same at any length)."""
    def cap(backend):
        monkeypatch.setattr(backend, "max_frames", lambda sample: FRAMES)
        return backend
    return cap


# -- the checker itself can fail ------------------------------------------------------------------------
def test_checker_refuses_cpu_tensors_meeting_the_model(talker):
    g, c0 = _frames(1)
    error, pattern = mix_errors()
    with device_check(talker) as dev:
        p = CodePredictor.from_talker(talker)
        cpu_u = frame_uniforms(torch.Generator().manual_seed(0), p.num_codes, batch=1)        # made on the CPU
        ar = Decoder(p, SAMPLER)
        k, v, _, codes = ar.buffers(1)
        with pytest.raises(error, match=pattern):                                           # the AR loop meets it
            ar.runner.frame(g.to(dev), c0.to(dev), k, v, cpu_u[0], codes)
        with pytest.raises(error, match=pattern):                                           # no device given
            p.c0_embedding.weight[:3] + torch.arange(p.c0_embedding.weight.shape[1])
        u = frame_uniforms(torch.Generator().manual_seed(0), p.num_codes, batch=1, device=dev)
        assert ar.decode_frame(g.to(dev), c0.to(dev), u).codes.device.type == DEVICE


# -- the method on plain tensors -------------------------------------------------------------------------
def test_frame_decoders_drafters_and_walkthrough(talker):
    g, c0 = _frames(2)
    ref_p = CodePredictor.from_talker(talker)
    u = frame_uniforms(torch.Generator().manual_seed(3), ref_p.num_codes, batch=2)
    reference = Decoder(ref_p, SAMPLER).decode_frame(g, c0, u).codes
    with device_check(talker) as dev:
        p = CodePredictor.from_talker(talker)
        g, c0, u = g.to(dev), c0.to(dev), u.to(dev)
        ar = Decoder(p, SAMPLER).decode_frame(g, c0, u).codes
        assert ar.device.type == DEVICE and torch.equal(ar.cpu(), reference)
        for kind, drafter in random_drafters(p).items():        # fused drafts (offsets, Medusa, reused heads)
            spec = Decoder(p, SAMPLER, drafter, TREES["sparse4"]).decode_frame(g[1:], c0[1:], u[1:])
            assert torch.equal(spec.codes.cpu(), reference[1:]), kind
        ar_rows, spec_rows = frame_walkthrough(p, g[:1], c0[:1])
        assert len(ar_rows) == p.num_codes and len(spec_rows) > 1


def test_training_acceptance_and_ceiling(talker):
    g, c0 = _frames(8, seed=5)
    codes = torch.cat((c0[:, None], torch.randint(0, SPEC.vocab_size, (8, 15),
                                                  generator=torch.Generator().manual_seed(1))), dim=1)
    with device_check(talker) as dev:
        p = CodePredictor.from_talker(talker)
        g, codes = g.to(dev), codes.to(dev)
        h = TeacherForcedHidden(p, g, codes)
        for kind in ("offsets", "offsets_prenorm", "medusa"):
            d = make_drafter(kind, p, 3)
            losses = train_drafter(d, h, codes, TrainConfig(epochs=1, batch_size=4), progress=False).loss_history
            assert len(losses) == 2
            a = acceptance_table(d, h.for_drafter(d)[:], codes, width=4)
            assert a.shape == (3, 4) and bool(((a >= 0) & (a <= 1)).all())
        ceiling, covered = ceiling_mean(*ceiling_sums(p, g[:1], codes[:1], SAMPLER, depth=2, width=4, m=2, beam=8))
        assert ceiling.shape == (2, 2) and covered.shape == (2,)
        assert uncapped_table(d, h[:], codes, 8, width=4).shape[1] >= 9
        diag = diagnostics(p, {"medusa": d}, g, codes, SAMPLER, 3, ideal_frames=torch.tensor([1], device=dev),
                           ideal=dict(width=2, beam=4))
        assert diag.scores["ideal"].acceptance.device.type == DEVICE and set(diag.translation) == {"normed", "prenorm"}


# -- the qwen3 backend: official generate, teacher forcing, replay, shards -------------------------------
def test_backend_teacher_forcing_synthesis_and_replay(backend, short):
    b = short(backend)
    samples = b.samples("train")[:2]
    g_cpu, codes_cpu = b.teacher_forced(samples)
    sample = b.samples("evaluation")[0]
    with backend_device_check(b):
        on_dev = b.samples("train")[:2]
        g, codes = b.teacher_forced(on_dev)
        assert g.device.type == DEVICE and torch.allclose(g.cpu(), g_cpu) and torch.equal(codes.cpu(), codes_cpu)
        sample = b.samples("evaluation")[0]
        ar = b.synthesize(sample, "ar", seed=0)
        sampler = SamplerConfig(**{k: b.talker_sampling[f"subtalker_{k}"] for k in ("top_k", "top_p", "temperature")})
        decoder = Decoder(b.predictor, sampler, make_drafter("offsets", b.predictor, 3), TREES["sparse4"])
        spec = b.synthesize(sample, decoder, seed=0)
        assert ar.codes.device.type == ar.g.device.type == DEVICE and 0 < ar.codes.shape[0] <= FRAMES
        assert torch.equal(ar.codes.cpu(), spec.codes.cpu())
        replay = replay_calls(decoder, [ar], [0])
        assert replay.calls == [spec.calls] and replay.mismatched == 0


def test_shard_extraction(backend, tmp_path):
    from helpers.artifacts import load_tensors
    from helpers.experiment.stages.shards import extract_shard
    with backend_device_check(backend, roles=()):
        stem = extract_shard(backend, "validation", tmp_path, 0, 2, batch_size=2)
    t = load_tensors(stem.with_suffix(".safetensors"))
    assert t["g"].shape[0] == t["codes"].shape[0] == int(t["frames"].sum()) > 0


# -- the evaluation stage path: cached stages on the qwen3 backend ---------------------------------------
def test_stages_on_the_device(qwen3_tiny, tmp_path, short):
    from helpers.experiment.stages import stages
    from helpers.experiment.stages.quality import control_codes
    from qwen3_tiny import transcribed_runs
    from helpers.experiment.stages.stage_cache import clear_caches
    from qwen3_tiny import tiny_params
    P = tiny_params(qwen3_tiny, output_dir=str(tmp_path), languages=["en"], train_samples=4, validation_samples=2,
                    calibration_samples=1, drafters=["reused", "offsets"], tree_sizes=[4], tree_size=4,
                    ceiling_frames=1, wer_seeds=1, drafter_epochs=1, workers=1,   # every job here, under the check
                    drafter_targets="distributions")      # the predictor's own draws and distributions, on the device
    b = short(stages.backend(P))
    b.transcribe([b.decode(b.samples("evaluation")[0].codes)], "en")   # Whisper loaded here, on the CPU: it is a
    with backend_device_check(b):                                      # model of its own (inference on lazy fails)
        g, h, codes = stages.teacher_forced(P, "train")
        assert g.device.type == codes.device.type == h[:1].device.type == DEVICE
        g_t, targets = stages.drafter_targets(P, "train")
        assert targets.device.type == g_t.device.type == DEVICE and torch.equal(targets[:, 0], codes[:, 0])
        trained = stages.drafters(P, progress=False)
        assert trained.drafters["offsets"].offsets.device.type == DEVICE
        assert 0 < stages.calibration(P).frames <= FRAMES
        assert stages.diagnostics(P).scores["offsets"].frames > 0
        ev = stages.evaluation(P)
        assert 0 < ev.frames_identical == ev.frames_compared
        clear_caches("stages")                                # the load path (artifacts read back from disk)
        loaded = stages.evaluation(P)
        assert {r.g.device.type for r in loaded.ar + loaded.spec} == {DEVICE}
        assert stages.teacher_forced(P, "validation")[0].device.type == DEVICE
        recorded_g, recorded_c0 = stages.recorded_frames(P, 2)
        assert recorded_g.device.type == recorded_c0.device.type == DEVICE
        (run, hyp, seconds), = transcribed_runs(b, ev.samples, "ar", [P.seed])     # synthesis, decode, ASR
        assert run.codes.device.type == DEVICE and isinstance(hyp, str) and seconds > 0
        control, = control_codes(P, [run], [P.seed])                  # the parity control's redraw
        assert control.device.type == DEVICE and control.shape == run.codes.shape
    clear_caches("stages")                                    # drafters loaded on the device stay out of reach


# -- one weight copy per model, however many syntheses ---------------------------------------------------
def _live_cores() -> int:
    gc.collect()
    return sum(type(o) is FusedCore for o in gc.get_objects())          # type(): no weakproxy lookups


def test_repeated_synthesis_keeps_one_weight_copy(backend, short):
    b = short(backend)
    sample = b.samples("evaluation")[0]
    sampler = SamplerConfig(**{k: b.talker_sampling[f"subtalker_{k}"] for k in ("top_k", "top_p", "temperature")})
    decoder = Decoder(b.predictor, sampler, make_drafter("reused", b.predictor, 3), TREES["sparse4"], core=b.core)

    def run(seeds):
        for seed in seeds:
            ar, spec = b.synthesize(sample, "ar", seed=seed), b.synthesize(sample, decoder, seed=seed)
            assert torch.equal(ar.codes, spec.codes)

    run([0])
    cores = _live_cores()
    run(range(1, 6))
    assert _live_cores() == cores                                       # no weight copy per synthesis
    assert b.predictor is b.predictor
    assert decoder.core is b.core                                       # AR synthesis and decoder share the copies
