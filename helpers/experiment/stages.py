"""The experiment as cached stages, shared by the notebooks (each notebook runs one stage and shows it).

    data -> drafters -> calibration -> evaluation -> wer

Every stage writes its artifacts to `outputs/<run>/artifacts/<stage>-<key>/` (safetensors and JSON,
built in a temporary folder and renamed), where the key hashes the parameters the stage and the
stages before it depend on. A stage whose artifacts exist is loaded, not recomputed, so any notebook
runs on its own (it builds what it needs) and re-running a notebook costs nothing new.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields as dataclass_fields

import torch

from helpers.artifacts import cached_step, load_json, params_key, load_tensors, save_json, save_tensors
from helpers.backends.base import Backend, Sample
from helpers.method.calibration import acceptance_table, expected_tokens_per_step, greedy_tree, uncapped_table
from helpers.method.predictor import CodePredictor
from helpers.method.ceiling import ceiling_mean, ceiling_sums, ideal_drafts, target_sharpness
from helpers.method.decoding import SpeculativeDecoder
from helpers.method.diagnostics import Diagnostics, diagnostics as compute_diagnostics
from helpers.method.drafters import OFFSET_KINDS, Drafter, make_drafter
from helpers.experiment.params import RunParams
from helpers.method.parity import CodeParity, FrameComparison, code_parity, compare_frames, run_parity
from helpers.experiment.pool import run_jobs, worker_count
from helpers.method.replay import Replay, replay_calls
from helpers.method.sampling import SamplerConfig
from helpers.adapter.synthesis import Synthesis
from helpers.method.training import TeacherForcedHidden, TrainConfig, train_drafter
from helpers.method.tree import SparseTree

STAGE_FIELDS = {
    "data": ("backend", "mini_preset", "mini_build_seed", "model_id_or_path", "dtype", "attn_implementation", "seed", "languages",
             "train_samples", "validation_samples", "calibration_samples", "eval_samples_per_language"),
    "drafters": ("inner_loop_dtype", "depth", "drafters", "drafter_epochs", "drafter_lr", "drafter_batch_size", "acceptance_width"),
    "calibration": ("top_k", "top_p", "temperature", "tree_sizes", "ceiling_frames"),
    "evaluation": ("tree_size",),
    "wer": ("wer_seeds",),
}
QWEN3_DATA_FIELDS = ("speaker", "max_utterance_seconds", "whisper_id") + tuple(
    f"{d}_{k}" for d in ("voxpopuli", "librispeech", "fleurs") for k in ("id", "config", "split", "revision", "data_dir")
    if (d, k) != ("fleurs", "config"))
CALIBRATION_SEED = 10_000            # calibration synthesis seeds: P.seed + CALIBRATION_SEED + index
WER_SEED_STRIDE = 1_000              # WER seed s of sample i: P.seed + s * WER_SEED_STRIDE + i


def stage_params(P: RunParams, stage: str) -> dict:
    """The parameters a stage depends on: its own fields and those of every stage before it."""
    names = list(STAGE_FIELDS)
    keys = [k for s in names[:names.index(stage) + 1] for k in STAGE_FIELDS[s]]
    if P.backend == "qwen3":
        keys += QWEN3_DATA_FIELDS                   # where the real backend's data and ASR come from
    return {k: getattr(P, k) for k in keys}


_LOADED: dict[tuple, object] = {}


def _cached(P: RunParams, stage: str, build, load, name: str | None = None):
    """load(folder) of the stage's artifacts, built first if absent; loaded once per process."""
    params = stage_params(P, stage)
    key = (str(P.run_dir), name or stage, params_key(params))
    if key not in _LOADED:
        _LOADED[key] = load(cached_step(P.run_dir / "artifacts", name or stage, params, build))
    return _LOADED[key]


def load_backend(P: RunParams) -> Backend:
    """The backend the run parameters name, built from plain values (backends never see RunParams)."""
    sampling = dict(top_k=P.top_k, top_p=P.top_p, temperature=P.temperature)
    if P.backend == "mini":
        from helpers.backends.mini.backend import MiniBackend
        return MiniBackend.load(P.cache_dir, P.mini_preset, P.languages, P.device, P.dtype, P.inner_loop_dtype,
                                seed=P.mini_build_seed,
                                train=P.train_samples, validation=P.validation_samples,
                                calibration=P.calibration_samples, evaluation=P.eval_samples_per_language, **sampling)
    from helpers.backends.qwen3.backend import Qwen3Backend
    return Qwen3Backend.load(P.model_id_or_path, P.device, P.dtype, P.attn_implementation, data=qwen3_data(P),
                             inner_loop_dtype=P.inner_loop_dtype,
                             speaker=P.speaker, whisper_id=P.whisper_id, asr_batch_size=P.asr_batch_size, **sampling)


def qwen3_data(P: RunParams):
    """The qwen3 backend's data settings (`DataSpec`: datasets, splits, sizes, seed) from the run parameters."""
    from helpers.backends.qwen3.data import DataSpec
    return DataSpec(**{f.name: tuple(getattr(P, f.name)) if f.name == "languages" else getattr(P, f.name)
                       for f in dataclass_fields(DataSpec)})


_BACKENDS: dict[str, Backend] = {}


def backend(P: RunParams) -> Backend:
    """The run's backend, loaded once per process for the same data, device and sampling parameters."""
    key = params_key([stage_params(P, "data"), P.device, P.inner_loop_dtype, P.top_k, P.top_p, P.temperature])
    if key not in _BACKENDS:
        _BACKENDS.clear()                          # one model in memory at a time
        _BACKENDS[key] = load_backend(P)
    return _BACKENDS[key]


def sampler(P: RunParams) -> SamplerConfig:
    return SamplerConfig(P.top_k, P.top_p, P.temperature)


def main_drafter(P: RunParams) -> str:
    """The drafter of Table 3, the lossless check and WER (`main_drafter_choice`)."""
    return main_drafter_choice(P)["name"]


def main_drafter_choice(P: RunParams) -> dict:
    """`choose_main_drafter` on this run: both offset variants trained, the calibration stage runs first."""
    trained = [k for k in OFFSET_KINDS if k in P.drafters]
    expected = {k: calibration(P).expected[k][P.tree_size] for k in trained} if len(trained) > 1 else {}
    return choose_main_drafter(P.drafters, expected, P.tree_size)


def choose_main_drafter(kinds: list[str], expected: dict[str, float], tree_size: int) -> dict:
    """{"name", "why"[, "expected_tokens_per_step"]}: of the offset variants in `kinds` (after / before the final
    norm), the one with the higher expected tokens/step at N = tree_size on the calibration set (`expected`, needed
    when both are trained; a tie keeps the paper's, after the norm); the only one trained; else the last listed."""
    trained = [k for k in OFFSET_KINDS if k in kinds]
    if not trained:
        return {"name": kinds[-1], "why": "no offset variant trained: the last drafter listed"}
    if len(trained) == 1:
        return {"name": trained[0], "why": "the only offset variant trained"}
    if set(expected) != set(trained):
        raise ValueError(f"choosing between {trained} needs the expected tokens/step of each, got {sorted(expected)}")
    name = max(trained, key=lambda k: (expected[k], -trained.index(k)))
    scores = ", ".join(f"{k} {expected[k]:.3f}" for k in trained)
    return {"name": name, "why": f"higher expected tokens/step at N={tree_size} on the calibration set ({scores})",
            "expected_tokens_per_step": {k: expected[k] for k in trained}}


# -- data: the encoded samples of every role, and teacher-forced (g, codes) ---------------------------
SAMPLE_FIELDS = ("id", "lang", "text", "speaker", "seconds")


def samples(P: RunParams, role: str) -> list[Sample]:
    """The backend's samples of a role (text, input_ids [1, n + 8], codes [T, 16], ...), saved once per run: the
    datasets are streamed and encoded by the first process that asks, every later one reads the artifact."""
    b = backend(P)

    def build(folder):
        rows = b.samples(role)
        tensors = {f"{i}.{k}": v for i, s in enumerate(rows) for k, v in (("input_ids", s.input_ids), ("codes", s.codes))
                   if v is not None}
        save_tensors(folder / "samples.safetensors", tensors)
        save_json(folder / "samples.json", [{k: getattr(s, k) for k in SAMPLE_FIELDS} for s in rows])

    def load(folder):
        t, device = load_tensors(folder / "samples.safetensors"), b.model.device
        return [Sample(**row, input_ids=t[f"{i}.input_ids"].to(device),
                       codes=t[f"{i}.codes"].to(device) if f"{i}.codes" in t else None)
                for i, row in enumerate(load_json(folder / "samples.json"))]

    return _cached(P, "data", build, load, name=f"samples-{role}")


def dataset_table(P: RunParams) -> list[dict]:
    """The paper's Table 1 shape (stage, dataset, language, samples, hours, frames) of the run's saved samples."""
    return backend(P).dataset_table(lambda role: samples(P, role))


def teacher_forced(P: RunParams, role: str) -> tuple[torch.Tensor, TeacherForcedHidden, torch.Tensor]:
    """g [F, H_talker], h [F, 15, H] (computed per batch on indexing: h[idx], h[:]), codes [F, 16] over every
    frame of a role (train or validation)."""
    b = backend(P)

    def build(folder):
        g, codes = b.teacher_forced(samples(P, role))
        save_tensors(folder / "teacher_forced.safetensors", {"g": g, "codes": codes})

    def load(folder):
        t = load_tensors(folder / "teacher_forced.safetensors")
        g, codes = t["g"].to(b.predictor.device, b.predictor.dtype), t["codes"].to(b.predictor.device)
        return g, TeacherForcedHidden(b.predictor, g, codes), codes

    return _cached(P, "data", build, load, name=f"data-{role}")


# -- drafters: trained on teacher-forced train data, scored on validation ---------------------------
@dataclass
class TrainedDrafters:
    drafters: dict[str, Drafter]
    loss_history: dict[str, list[float]]           # per training step
    validation: dict[str, list[list[float]]]       # a[d][r] on teacher-forced validation


def drafters(P: RunParams, progress: bool = True) -> TrainedDrafters:
    b = backend(P)
    predictor = b.predictor

    def build(folder):
        _, h, codes = teacher_forced(P, "train")
        _, h_val, codes_val = teacher_forced(P, "validation")
        history, validation = {}, {}
        for kind in P.drafters:
            d = make_drafter(kind, predictor, P.depth)
            if list(d.parameters()):
                cfg = TrainConfig(P.drafter_epochs, P.drafter_lr, P.drafter_batch_size, P.seed)
                history[kind] = train_drafter(d, h, codes, cfg, progress=progress).loss_history
                save_tensors(folder / f"{kind}.safetensors", d.state_dict())
            validation[kind] = acceptance_table(d, h_val.for_drafter(d)[:], codes_val, P.acceptance_width).tolist()
        save_json(folder / "history.json", {"loss_history": history, "validation": validation})

    def load(folder):
        out = {}
        for kind in P.drafters:
            d = make_drafter(kind, predictor, P.depth)
            if (folder / f"{kind}.safetensors").exists():
                d.load_state_dict(load_tensors(folder / f"{kind}.safetensors"))
            out[kind] = d                                  # parameters stay in their master dtype
        h = load_json(folder / "history.json")
        return TrainedDrafters(out, h["loss_history"], h["validation"])

    return _cached(P, "drafters", build, load)


# -- calibration: free-running AR synthesis, acceptance tables, greedy trees ------------------------
@dataclass
class Calibration:
    tables: dict[str, torch.Tensor]                # a [K, width] per drafter (free-running calibration data), wide
                                                   # enough that no tree of tree_sizes takes the last rank
    trees: dict[str, dict[int, SparseTree]]        # greedy tree per drafter and N
    expected: dict[str, dict[int, float]]          # expected tokens/step per drafter and N
    entropy: list[float]                           # target p_t entropy per position (nats)
    top_prob: list[float]                          # target p_t top probability per position
    ceiling: list[list[float]]                     # the ideal drafter's a[d][r] (exact marginals), [K][8]
    ceiling_covered: list[float]                   # probability mass its enumeration covered, per depth
    frames: int


def calibration(P: RunParams) -> Calibration:
    b = backend(P)
    predictor, trained = b.predictor, drafters(P)

    def build(folder):
        runs = run_jobs(P, synthesis_job, [SynthesisJob("calibration", i, P.seed + CALIBRATION_SEED + i, "ar")
                                           for i in range(len(samples(P, "calibration")))], "calibration synthesis")
        g = torch.cat([r.g for r in runs]).to(predictor.dtype)
        codes = torch.cat([r.codes for r in runs])
        r = predictor.teacher_forced_hidden(g, codes, prenorm=True)        # one pass: r, and h = norm(r)
        h = predictor.final_norm(r)
        tables = {k: uncapped_table(d, r if d.prenorm else h, codes, max(P.tree_sizes), P.acceptance_width)
                  for k, d in trained.drafters.items()}
        save_tensors(folder / "tables.safetensors", tables)
        entropy, top = target_sharpness(predictor, h, sampler(P))
        pick = torch.linspace(0, len(codes) - 1, min(P.ceiling_frames, len(codes)), device=g.device).long()
        parts = run_jobs(P, ceiling_job, _frame_blocks(g[pick], codes[pick]), "ideal drafter")
        ceiling, covered = ceiling_mean(*(sum(x) for x in zip(*parts)))
        trees = {k: {n: greedy_tree(a, n).paths for n in P.tree_sizes} for k, a in tables.items()}
        save_json(folder / "calibration.json", {"trees": trees, "entropy": entropy.tolist(), "top_prob": top.tolist(),
                                                "ceiling": ceiling.tolist(), "ceiling_covered": covered.tolist(),
                                                "frames": len(codes)})

    def load(folder):
        tables = load_tensors(folder / "tables.safetensors")
        c = load_json(folder / "calibration.json")
        trees = {k: {int(n): SparseTree(paths) for n, paths in by_n.items()} for k, by_n in c["trees"].items()}
        expected = {k: {n: expected_tokens_per_step(t, tables[k]) for n, t in by_n.items()}
                    for k, by_n in trees.items()}
        return Calibration(tables, trees, expected, c["entropy"], c["top_prob"], c["ceiling"], c["ceiling_covered"],
                           c["frames"])

    return _cached(P, "calibration", build, load, name="calibration-uncapped")   # (width-8 tables: "calibration")


def diagnostics(P: RunParams) -> Diagnostics:
    """Per-position diagnostics (`helpers.method.diagnostics`) of every trained drafter on the teacher-forced
    validation frames; the ideal drafter on `ceiling_frames` of them. Saved as JSON, loaded as tensors."""
    b = backend(P)
    predictor, trained = b.predictor, drafters(P)

    def build(folder):
        g, _, codes = teacher_forced(P, "validation")
        pick = torch.linspace(0, len(codes) - 1, min(P.ceiling_frames, len(codes)), device=g.device).long()
        drafted = torch.cat([d for d, _ in run_jobs(P, ideal_job, _frame_blocks(g[pick], codes[pick]), "ideal drafter")])
        d = compute_diagnostics(predictor, trained.drafters, g, codes, sampler(P), P.depth, ideal_frames=pick,
                                ideal_drafted=drafted, sizes=b.codebook_sizes)
        save_json(folder / "diagnostics.json", d.to_dict())

    return _cached(P, "calibration", build, lambda folder: Diagnostics.from_dict(load_json(folder / "diagnostics.json")),
                   name="diagnostics")


IDEAL = dict(width=32, beam=1024)       # the ideal drafter's enumeration: codes per path and level, paths kept
IDEAL_BLOCK = 4                         # frames per ideal-drafter job
IDEAL_DTYPE = torch.float32             # the enumeration's dtype, whatever the run's: a diagnostic (a lower bound
                                        # whose slack is the uncovered mass, not rounding), 2.3x faster than float64
                                        # on the miniature's CPU and equal to it to 7 significant digits (measured);
                                        # bf16 would not be
_IDEAL: dict[str, object] = {}


def ideal_predictor(P: RunParams) -> CodePredictor:
    """The code predictor in IDEAL_DTYPE on the model's device, for the ideal drafter (`predictor_in`, once per
    process)."""
    b = backend(P)
    if _IDEAL.get("backend") is not b:
        _IDEAL.update(backend=b, predictor=predictor_in(P, IDEAL_DTYPE))
    return _IDEAL["predictor"]


def _frame_blocks(g: torch.Tensor, codes: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(g [F, H_talker], codes [F, 16]) in blocks of IDEAL_BLOCK frames: the same blocks for any number of workers."""
    return [(g[i:i + IDEAL_BLOCK], codes[i:i + IDEAL_BLOCK]) for i in range(0, len(codes), IDEAL_BLOCK)]


def ceiling_job(P: RunParams, block: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """`ceiling_sums` of the ideal drafter on one block of calibration frames."""
    return ceiling_sums(ideal_predictor(P), *block, sampler(P), depth=P.depth, m=P.acceptance_width, **IDEAL)


def ideal_job(P: RunParams, block: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The ideal drafter's rank-0 drafts (and covered mass) on one block of validation frames (`ideal_drafts`)."""
    return ideal_drafts(ideal_predictor(P), *block, sampler(P), P.depth, **IDEAL)


def decoder(P: RunParams, kind: str, n: int) -> SpeculativeDecoder:
    """The speculative decoder of drafter `kind` with its calibrated tree of size n."""
    b = backend(P)
    return SpeculativeDecoder(b.predictor, drafters(P).drafters[kind], calibration(P).trees[kind][n], sampler(P))


def predictor_in(P: RunParams, dtype: torch.dtype, device: torch.device | str | None = None) -> CodePredictor:
    """The code predictor in `dtype` on `device` (default: the model's): the run's own where it already is so, else
    a copy (the talker is never changed)."""
    b = backend(P)
    if b.predictor.dtype == dtype and (device is None or b.predictor.device.type == torch.device(device).type):
        return b.predictor
    return CodePredictor.from_talker(b.model.talker, dtype=dtype, device=device)


def inner_loop_in(P: RunParams, dtype: torch.dtype, device: torch.device | str | None = None) -> tuple[CodePredictor, Drafter]:
    """The code predictor and main drafter in `dtype` on `device` (default: the model's): the run's own inner loop
    where it already is so, else copies (`predictor_in`)."""
    d = drafters(P).drafters[main_drafter(P)]
    predictor = predictor_in(P, dtype, device)
    if predictor is backend(P).predictor:
        return predictor, d
    copied = make_drafter(d.kind, predictor, P.depth)
    copied.load_state_dict(d.state_dict())                     # cast into the copy's own (master) dtype
    return predictor, copied


def deployed(P: RunParams) -> tuple[CodePredictor, Drafter]:
    """The code predictor and main drafter as a device runs them (timing): in the run's dtype on its device, float32
    where the run is float64 (float64 is for exact comparisons; no deployment runs it), whatever the inner loop's."""
    return inner_loop_in(P, torch.float32 if P.dtype == "float64" else getattr(torch, P.dtype))


def exportable(P: RunParams) -> tuple[CodePredictor, Drafter]:
    """CPU float32 copies of the code predictor and main drafter for Core ML (which computes in fp16 itself),
    whatever the run's dtype and device."""
    return inner_loop_in(P, torch.float32, "cpu")


def recorded_frames(P: RunParams, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """g [F, H_talker] and c0 [F] of the first `count` frames of the AR evaluation synthesis (real talker states)."""
    ev = evaluation(P)
    return torch.cat([r.g for r in ev.ar])[:count], torch.cat([r.codes[:, 0] for r in ev.ar])[:count]


# -- evaluation: free-running synthesis, AR vs speculative, per language ----------------------------
@dataclass
class Evaluation:
    samples: list[Sample]
    ar: list[Synthesis]                            # AR synthesis per evaluation sample (seed P.seed + index)
    spec: list[Synthesis]                          # speculative (main drafter, N = tree_size), full official path
    comparison: FrameComparison                    # frame for frame: identical fraction, where frames first differ
    parity: CodeParity                             # per code position: AR vs speculative code histograms
    replay: dict[str, dict[int, float]]            # measured tokens/step (replayed inner loop): main drafter at
                                                   # every N, the others at tree_size
    replay_mismatched: dict[str, dict[int, int]]   # replayed frames whose codes differ from the AR run's (0 if exact)
    replay_matches_synthesis: bool | None          # replay's calls == the full path's (None: frames not identical)

    @property
    def frames_compared(self) -> int:
        return self.comparison.frames_compared

    @property
    def frames_identical(self) -> int:
        return self.comparison.frames_identical


def _save_runs(path, runs: list[Synthesis]) -> None:
    save_tensors(path, {f"{i}.{k}": v for i, r in enumerate(runs)
                        for k, v in (("codes", r.codes), ("g", r.g), ("calls", torch.tensor(r.calls)))})


def _load_runs(path, count: int, device=None) -> list[Synthesis]:
    t = load_tensors(path, device=str(device or "cpu"))
    return [Synthesis(t[f"{i}.codes"], t[f"{i}.g"], t[f"{i}.calls"].tolist()) for i in range(count)]


def compare_runs(a: list[Synthesis], b: list[Synthesis]) -> tuple[FrameComparison, CodeParity]:
    """Frame for frame and in distribution per code position: two lists of syntheses of the same seeds."""
    return (compare_frames([r.codes for r in a], [r.codes for r in b]),
            code_parity(torch.cat([r.codes for r in a]), torch.cat([r.codes for r in b])))


def syntheses(P: RunParams) -> tuple[list[Synthesis], list[Synthesis]]:
    """AR and speculative (main drafter, N = tree_size) synthesis of every evaluation sample, seed P.seed + index,
    on P.workers processes: saved as they are, before anything is compared (the run's most expensive work is never
    lost to a check)."""
    b = backend(P)
    rows = samples(P, "evaluation")
    seeds = [P.seed + i for i in range(len(rows))]

    def build(folder):
        systems = ("ar", main_drafter(P))
        runs = run_jobs(P, synthesis_job, [SynthesisJob("evaluation", i, seed, kind)
                                           for kind in systems for i, seed in enumerate(seeds)], "synthesis")
        _save_runs(folder / "ar.safetensors", runs[:len(rows)])
        _save_runs(folder / "spec.safetensors", runs[len(rows):])

    def load(folder):
        return (_load_runs(folder / "ar.safetensors", len(rows), b.model.device),
                _load_runs(folder / "spec.safetensors", len(rows), b.model.device))

    return _cached(P, "evaluation", build, load, name="syntheses")


@dataclass(frozen=True)
class SynthesisJob:
    """One free-running synthesis: sample `index` of `role`, its seed, "ar" or a drafter kind (at N = tree_size)."""
    role: str
    index: int
    seed: int
    system: str
    temperature: float | None = None        # None: the run's


def synthesis_job(P: RunParams, job: SynthesisJob) -> Synthesis:
    b = backend(P)
    dec = "ar" if job.system == "ar" else decoder(P, job.system, P.tree_size)
    return b.synthesize(samples(P, job.role)[job.index], dec, seed=job.seed, temperature=job.temperature)


def replay_job(P: RunParams, job: tuple[str, int, list[int]]) -> Replay:
    """The AR evaluation runs `indices` replayed by drafter `kind` at tree size n (`replay_calls`)."""
    kind, n, indices = job
    ar, _ = syntheses(P)
    return replay_calls(decoder(P, kind, n), [ar[i] for i in indices], [P.seed + i for i in indices], strict=P.exact)


REPLAY_CHUNK = 10                   # evaluation runs per replay job


def evaluation(P: RunParams) -> Evaluation:
    """The evaluation syntheses compared (frames, distribution) and replayed for every drafter and N. Never raises
    on a differing frame: with an inexact inner loop (P.exact False) differences are counted; with a float64 one
    the notebooks assert there are none (and replay raises on one, after the syntheses are saved)."""
    b = backend(P)
    rows = samples(P, "evaluation")
    ar, spec = syntheses(P)

    def build(folder):
        comparison, parity = compare_runs(ar, spec)
        replay, mismatched, matches = {}, {}, None
        configs = [(kind, n) for kind in P.drafters           # the main drafter at every N, the others at tree_size
                   for n in (P.tree_sizes if kind == main_drafter(P) else [P.tree_size])]
        chunks = [list(range(i, min(i + REPLAY_CHUNK, len(ar)))) for i in range(0, len(ar), REPLAY_CHUNK)]
        parts = iter(run_jobs(P, replay_job, [(kind, n, c) for kind, n in configs for c in chunks], "replay"))
        for kind, n in configs:
            done = [next(parts) for _ in chunks]
            calls = [frame_calls for r in done for frame_calls in r.calls]
            if (kind, n) == (main_drafter(P), P.tree_size) and comparison.identical_fraction == 1.0:
                matches = calls == [s.calls for s in spec]
            replay.setdefault(kind, {})[n] = b.predictor.num_codes * sum(r.frames for r in done) / sum(map(sum, calls))
            mismatched.setdefault(kind, {})[n] = sum(r.mismatched for r in done)
        save_json(folder / "evaluation.json", {"comparison": comparison.to_dict(), "parity": parity.to_dict(),
                                               "replay": replay, "replay_mismatched": mismatched,
                                               "replay_matches_synthesis": matches})

    def load(folder):
        e = load_json(folder / "evaluation.json")
        c, par = e["comparison"], e["parity"]
        def by_n(d):
            return {k: {int(n): v for n, v in d_k.items()} for k, d_k in d.items()}
        return Evaluation(rows, ar, spec, FrameComparison(c["frames_compared"], c["frames_identical"],
                                                              c["first_difference"], c["onset"]),
                          CodeParity(par["p_values"], tuple(par["samples"]), par["alpha"]),
                          by_n(e["replay"]), by_n(e["replay_mismatched"]), e["replay_matches_synthesis"])

    return _cached(P, "evaluation", build, load)


def per_language(ev: Evaluation, frames_per_second: float) -> dict[str, dict]:
    """Tokens/step of the speculative inner loop per language (AR is 1 by definition), frames and audio minutes."""
    out: dict[str, dict] = {}
    for s, run in zip(ev.samples, ev.spec):
        row = out.setdefault(s.lang, {"frames": 0, "calls": 0, "tokens": 0})
        row["frames"] += len(run.calls)
        row["calls"] += sum(run.calls)
        row["tokens"] += len(run.calls) * (run.codes.shape[1] - 1)
    return {lang: {"tokens_per_step_ar": 1.0, "tokens_per_step_spec": r["tokens"] / r["calls"], "frames": r["frames"],
                   "audio_min": r["frames"] / frames_per_second / 60} for lang, r in sorted(out.items())}


# -- quality and parity: AR vs speculative synthesis from independent random streams, several seeds -------------
STREAMS = {"ar": 0, "spec": 1, "control": 2}   # independent random streams of the quality stage
STREAM_STRIDE = 1_000_000          # seed of stream k, seed s, sample i: P.seed + k * STREAM_STRIDE + s * WER_SEED_STRIDE + i
CONTROL_TEMPERATURE = 1.2          # the parity test's control: AR at this temperature must be told apart
CONTROL_SEEDS = 1                  # ... from the first seed only: fewer frames than the test itself has, a stricter
                                   # proof of the test's power, and a third of the syntheses of one more system


def quality_seeds(P: RunParams, stream: str, seed_index: int, indices: list[int]) -> list[int]:
    """Synthesis seeds of one stream ("ar", "spec", "control") and WER seed for the evaluation samples `indices`
    (AR's first seed is the evaluation stage's: P.seed + index)."""
    if max(indices, default=0) >= WER_SEED_STRIDE or P.wer_seeds * WER_SEED_STRIDE > STREAM_STRIDE:
        raise ValueError(f"fewer than {WER_SEED_STRIDE} evaluation samples and at most {STREAM_STRIDE // WER_SEED_STRIDE}"
                         f" WER seeds keep the streams apart; got {max(indices) + 1} and {P.wer_seeds}")
    return [P.seed + STREAMS[stream] * STREAM_STRIDE + seed_index * WER_SEED_STRIDE + i for i in indices]


def transcribed_runs(b: Backend, samples: list[Sample], decoder, seeds: list[int]) -> list[tuple[Synthesis, str, float]]:
    """Free-running synthesis of each sample with its seed, decoded and transcribed (per language, in order):
    [(synthesis, transcript, audio seconds)]. What the evaluation shards run."""
    runs = [b.synthesize(s, decoder, seed=seed) for s, seed in zip(samples, seeds, strict=True)]
    audio = [b.decode(r.codes) for r in runs]
    hyps = transcripts(b, samples, audio)
    return [(r, h, len(a) / b.sample_rate) for r, h, a in zip(runs, hyps, audio)]


def transcripts(b: Backend, samples: list[Sample], audio: list) -> list[str]:
    """ASR transcripts of each sample's audio, batched per language (the backend must have an ASR for each)."""
    hyps: list[str] = [""] * len(samples)
    for lang in dict.fromkeys(s.lang for s in samples):
        idx = [i for i, s in enumerate(samples) if s.lang == lang]
        for i, h in zip(idx, b.transcribe([audio[i] for i in idx], lang)):
            hyps[i] = h
    return hyps


class _Stopwatch:
    """Wall and CPU (process) seconds per phase: `with watch("ar"): ...`; CPU time does not grow with others' load."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._phase = None

    def __call__(self, phase: str) -> "_Stopwatch":
        self._phase = phase
        return self

    def __enter__(self):
        self._start = (time.perf_counter(), time.process_time())

    def __exit__(self, *exc):
        for totals, now, then in zip((self.wall, self.cpu), (time.perf_counter(), time.process_time()), self._start):
            totals[self._phase] = totals.get(self._phase, 0.0) + now - then

    def add(self, seconds: dict) -> None:
        """Add another stopwatch's `to_dict()` (a worker's) phase by phase."""
        for totals, part in ((self.wall, seconds["wall"]), (self.cpu, seconds["cpu"])):
            for phase, value in part.items():
                totals[phase] = totals.get(phase, 0.0) + value

    def to_dict(self) -> dict:
        return {"wall": {k: round(v, 1) for k, v in self.wall.items()}, "cpu": {k: round(v, 1) for k, v in self.cpu.items()}}


def _scores(b: Backend, group: list[Sample], audio: list, row: dict, name: str, first: bool) -> None:
    """Append PER (where the backend has a phoneme recogniser) and WER (where it has an ASR) of one system's audio
    of a language group to row[f"per_{name}"] and row[f"wer_{name}"]; the first seed's transcripts are kept.
    Where PER scores the language, WER is its extra column and is scored on the first seed only (`wer_first_only`)."""
    lang = group[0].lang
    if b.has_phoneme_asr(lang):
        refs, hyps = b.reference_phonemes(group), b.recognise_phonemes(audio)
        row[f"per_{name}"].append(b.phoneme_error_rate(refs, hyps))
        if first:
            row["phonemes"].append({"system": name, "ref": " ".join(refs[0]), "hyp": " ".join(hyps[0])})
    if b.has_asr(lang) and (first or not wer_first_only(b, lang)):
        refs, hyps = [s.text for s in group], transcripts(b, group, audio)
        row[f"wer_{name}"].append(b.error_rate(refs, hyps, lang))
        if first:
            row["transcripts"] += [{"system": name, "ref": r, "hyp": h} for r, h in zip(refs, hyps)]


def wer_first_only(b: Backend, lang: str) -> bool:
    """True where a phoneme recogniser scores `lang`: PER is then the quality metric over every seed and WER (an
    English ASR's, seconds per clip: most of the stage's scoring time) an extra column from the first seed."""
    return b.has_phoneme_asr(lang)


def _reference_scores(b: Backend, group: list[Sample], watch: _Stopwatch) -> dict:
    """PER of the original audio and of the ground-truth codes decoded, WER of the latter (None where not scored)."""
    lang, out = group[0].lang, {"per_gt": None, "per_codec": None, "wer_codec": None}
    if not (b.has_phoneme_asr(lang) or b.has_asr(lang)):
        return out
    with watch("decode"):
        codec = [b.decode(s.codes) for s in group]
    with watch("scoring"):
        if b.has_phoneme_asr(lang):
            refs, original = b.reference_phonemes(group), b.reference_audio(group)
            if original is not None:
                out["per_gt"] = b.phoneme_error_rate(refs, b.recognise_phonemes(original))
            out["per_codec"] = b.phoneme_error_rate(refs, b.recognise_phonemes(codec))
        if b.has_asr(lang):
            out["wer_codec"] = b.error_rate([s.text for s in group], transcripts(b, group, codec), lang)
    return out


@dataclass(frozen=True)
class QualityJob:
    """One language's reference scores (system "reference"), or one system's runs ("ar", "spec", "control") of
    one seed over the language's evaluation samples."""
    lang: str
    system: str
    seed_index: int = 0


def quality_job(P: RunParams, job: QualityJob) -> dict:
    """A `QualityJob` synthesised (AR's first seed: the evaluation stage's runs), decoded and scored:
    {"row": its part of the language's row, "codes": [codes [T, 16]], "seconds": phase -> wall / CPU,
     "synthesized", "decoded": frames}."""
    b, rows = backend(P), samples(P, "evaluation")
    indices = [i for i, s in enumerate(rows) if s.lang == job.lang]
    group = [rows[i] for i in indices]
    watch, out = _Stopwatch(), {"row": {}, "codes": [], "synthesized": 0, "decoded": 0}
    if job.system == "reference":
        out["row"] = _reference_scores(b, group, watch)
        if out["row"]["per_codec"] is not None or out["row"]["wer_codec"] is not None:
            out["decoded"] = sum(len(s.codes) for s in group)
        out["seconds"] = watch.to_dict()
        return out
    with watch(job.system):
        if (job.system, job.seed_index) == ("ar", 0):            # the evaluation stage's AR runs: the same seeds, kept
            runs = [syntheses(P)[0][i] for i in indices]
        else:
            dec = decoder(P, main_drafter(P), P.tree_size) if job.system == "spec" else "ar"
            temperature = CONTROL_TEMPERATURE if job.system == "control" else None
            runs = [b.synthesize(s, dec, seed=seed, temperature=temperature)
                    for s, seed in zip(group, quality_seeds(P, job.system, job.seed_index, indices))]
            out["synthesized"] = sum(len(r.codes) for r in runs)
    out["codes"] = [r.codes for r in runs]
    if job.system != "control" and (b.has_phoneme_asr(job.lang) or b.has_asr(job.lang)):
        with watch("decode"):
            audio = [b.decode(r.codes) for r in runs]
        out["decoded"] = sum(len(r.codes) for r in runs)
        out["row"] = {f"per_{job.system}": [], f"wer_{job.system}": [], "phonemes": [], "transcripts": []}
        with watch("scoring"):
            _scores(b, group, audio, out["row"], job.system, job.seed_index == 0)
    out["seconds"] = watch.to_dict()
    return out


def wer(P: RunParams) -> dict:
    """Quality and parity over P.wer_seeds seeds, AR and speculative (main drafter, N = tree_size) synthesis from
    independent random streams (`quality_seeds`; same-seed identity is the evaluation stage's):

    {"languages": {lang: {"per_gt", "per_codec": PER of the original audio and of the ground-truth codes decoded,
                          "per_ar", "per_spec": [per seed], "wer_codec", "wer_ar", "wer_spec": the same in WER where
                          there is an ASR (None / [] elsewhere; the first seed only where PER scores the
                          language, `wer_first_only`), "frames_ar", "frames_spec", "parity_p": this
                          language's adjusted p, "phonemes", "transcripts": the first seed's}},
     "parity": `run_parity(...).to_dict()`, AR vs speculative runs of every language and seed (must not reject),
     "control": the same test, speculative (every seed) vs AR at CONTROL_TEMPERATURE (CONTROL_SEEDS seeds; must
     reject), "control_temperature",
     "seconds": {"wall", "cpu"}: {"ar", "spec", "control", "decode", "scoring"}, summed over the jobs
     (`quality_job`, on "workers" processes: "elapsed" is the stage's own wall time), and "recogniser" (its training
     where it was not cached; scoring: recognition and ASR), "frames": {"ar", "spec", "control": compared,
     "decoded", "synthesized": {"ar", "spec", "control"}}: what those seconds bought, "recogniser": its training history or None}."""
    b = backend(P)
    rows = samples(P, "evaluation")

    def build(folder):
        watch, start = _Stopwatch(), time.perf_counter()
        if any(b.has_phoneme_asr(lang) for lang in b.languages):
            with watch("recogniser"):                 # trained (or loaded) here, before the workers load it
                b.phoneme_recogniser_history()
        syntheses(P), main_drafter(P)                 # built here: the workers only load them
        langs = [lang for lang in b.languages if any(s.lang == lang for s in rows)]
        jobs = [QualityJob(lang, "reference") for lang in langs] + [
            QualityJob(lang, name, s_idx) for lang in langs for s_idx in range(P.wer_seeds)
            for name in (tuple(STREAMS) if s_idx < CONTROL_SEEDS else ("ar", "spec"))]
        done = dict(zip(jobs, run_jobs(P, quality_job, jobs, "quality runs")))
        codes = {k: {} for k in STREAMS}                           # stream -> lang -> [codes [T, 16]]
        result, decoded, synthesized = {}, 0, dict.fromkeys(STREAMS, 0)
        for job, part in done.items():
            watch.add(part["seconds"])
            decoded += part["decoded"]
            if job.system != "reference":
                synthesized[job.system] += part["synthesized"]
                codes[job.system].setdefault(job.lang, []).extend(part["codes"])
        for lang in langs:
            row = {f"{m}_{n}": [] for m in ("per", "wer") for n in ("ar", "spec")}
            row.update(phonemes=[], transcripts=[], **done[QualityJob(lang, "reference")]["row"])
            for job in (j for j in jobs if j.lang == lang and j.system != "reference"):
                for key, values in done[job]["row"].items():
                    row[key] += values
            row.update(frames_ar=sum(map(len, codes["ar"][lang])), frames_spec=sum(map(len, codes["spec"][lang])),
                       parity_p=run_parity(codes["ar"][lang], codes["spec"][lang]).p_min_adjusted)
            result[lang] = row
        pooled = {k: [c for by_lang in v.values() for c in by_lang] for k, v in codes.items()}
        frames = {k: sum(map(len, v)) for k, v in pooled.items()}
        save_json(folder / "wer.json", {"languages": result,
                                        "seconds": {**watch.to_dict(), "elapsed": round(time.perf_counter() - start, 1),
                                                    "workers": worker_count(P, len(jobs))},
                                        "frames": {**frames, "decoded": decoded, "synthesized": synthesized},
                                        "parity": run_parity(pooled["ar"], pooled["spec"]).to_dict(),
                                        "control": run_parity(pooled["spec"], pooled["control"]).to_dict(),
                                        "control_temperature": CONTROL_TEMPERATURE,
                                        "recogniser": b.phoneme_recogniser_history()})

    return _cached(P, "wer", build, lambda folder: load_json(folder / "wer.json"))
