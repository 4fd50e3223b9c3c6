"""The experiment as cached stages, shared by the notebooks (each notebook runs one stage and shows it).

    data (`helpers.experiment.stages.data_stage`) -> drafters -> calibration -> evaluation
        -> quality (`helpers.experiment.stages.quality`)

Every stage writes its artifacts to `outputs/<run>/artifacts/<stage>-<key>/` (safetensors and JSON,
built in a temporary folder and renamed), where the key hashes the parameters the stage and the
stages before it depend on (`helpers.experiment.stages.stage_cache`). A stage whose artifacts exist is loaded, not
recomputed, so any notebook runs on its own (it builds what it needs) and re-running a notebook costs nothing new.
The backend comes from `helpers.experiment.run.backend_factory`, the ideal drafter's jobs from
`helpers.experiment.stages.ideal`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.artifacts import load_json, load_tensors, save_json, save_tensors
from helpers.backends.base import Sample
from helpers.experiment.run.backend_factory import backend, predictor_in, sampler
from helpers.experiment.run.params import RunParams
from helpers.experiment.run.pool import run_jobs
from helpers.experiment.stages.data_stage import (  # noqa: F401 (re-exported)
    dataset_table, drafter_states, drafter_states_job, drafter_targets, samples, teacher_forced)
from helpers.experiment.stages.ideal import ceiling_job, frame_blocks, ideal_job
from helpers.experiment.stages.stage_cache import cached
from helpers.adapter.synthesis import Synthesis
from helpers.method.calibration import acceptance_table, expected_tokens_per_step, greedy_tree, uncapped_table
from helpers.method.ceiling import ceiling_mean, target_sharpness
from helpers.method.decoding import Decoder
from helpers.method.diagnostics import Diagnostics, diagnostics as compute_diagnostics
from helpers.method.drafters import OFFSET_KINDS, Drafter, make_drafter
from helpers.method.main_drafter import choose_main_drafter
from helpers.method.parity import CodeParity, FrameComparison, code_parity, compare_frames
from helpers.method.predictor import CodePredictor
from helpers.method.replay import Replay, replay_calls, teacher_forced_states, walk_many
from helpers.method.training import TrainConfig, TrainResult, sweep_choice, train_drafter
from helpers.method.tree import SparseTree

CALIBRATION_SEED = 10_000            # calibration synthesis seeds: P.seed + CALIBRATION_SEED + index
WER_SEED_STRIDE = 1_000              # WER seed s of sample i: P.seed + s * WER_SEED_STRIDE + i


def main_drafter(P: RunParams) -> str:
    """The drafter of Table 3, the lossless check and WER (`main_drafter_choice`)."""
    return main_drafter_choice(P)["name"]


def main_drafter_choice(P: RunParams) -> dict:
    """`choose_main_drafter` on this run: both offset variants trained, the calibration stage runs first."""
    trained = [k for k in OFFSET_KINDS if k in P.drafters]
    expected = {k: calibration(P).expected[k][P.tree_size] for k in trained} if len(trained) > 1 else {}
    return choose_main_drafter(P.drafters, expected, P.tree_size)


# -- drafters: trained on teacher-forced train data, scored on validation ---------------------------
@dataclass
class TrainedDrafters:
    drafters: dict[str, Drafter]
    loss_history: dict[str, list[float]]           # per training step
    validation: dict[str, list[list[float]]]       # a[d][r] on teacher-forced validation
    training: dict[str, dict]                      # per trained drafter: lr (the sweep's pick), best_epoch, val_loss
                                                   # (held-out summed CE per frame, per epoch), sweep {lr: loss}


def drafters(P: RunParams, progress: bool = True) -> TrainedDrafters:
    b = backend(P)
    predictor = b.predictor

    def build(folder):
        drafter_targets(P, "train")                                  # built here: the workers only load them
        _, codes_val = drafter_targets(P, "validation")
        lrs = [float(lr) for lr in P.drafter_lr_sweep or [P.drafter_lr]]
        reads = sorted({make_drafter(k, predictor, P.depth).prenorm for k in P.drafters})
        run_jobs(P, drafter_states_job, [(role, prenorm) for role in ("train", "validation") for prenorm in reads])
        trainable = [k for k in P.drafters if list(make_drafter(k, predictor, P.depth).parameters())]
        jobs = [DrafterJob(kind, lr) for kind in trainable for lr in lrs]
        runs = dict(zip(jobs, run_jobs(P, drafter_job, jobs, "train drafters" if progress else None)))
        history, validation, training = {}, {}, {}
        for kind in P.drafters:
            d = make_drafter(kind, predictor, P.depth)
            if kind in trainable:
                sweep = sweep_choice({lr: runs[DrafterJob(kind, lr)][1] for lr in lrs})
                d.load_state_dict(runs[DrafterJob(kind, sweep.lr)][0])
                history[kind] = sweep.result.loss_history
                training[kind] = dict(lr=sweep.lr, best_epoch=sweep.result.best_epoch,
                                      val_loss=sweep.result.val_loss,
                                      sweep={f"{lr:g}": v for lr, v in sweep.best_val.items()})
                save_tensors(folder / f"{kind}.safetensors", d.state_dict())
            validation[kind] = acceptance_table(d, drafter_states(P, "validation", d.prenorm)[:], codes_val,
                                                P.acceptance_width).tolist()
        save_json(folder / "history.json", {"loss_history": history, "validation": validation, "training": training})

    def load(folder):
        out = {}
        for kind in P.drafters:
            d = make_drafter(kind, predictor, P.depth)
            if (folder / f"{kind}.safetensors").exists():
                d.load_state_dict(load_tensors(folder / f"{kind}.safetensors"))
            out[kind] = d                                  # parameters stay in their master dtype
        h = load_json(folder / "history.json")
        return TrainedDrafters(out, h["loss_history"], h["validation"], h["training"])

    return cached(P, "drafters", build, load)


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
    ceiling_expected: dict[int, float]             # the ideal drafter's expected tokens/step per N (its greedy tree
                                                   # over its own table: the most any drafter reading h_t can expect)


def calibration(P: RunParams) -> Calibration:
    b = backend(P)
    predictor, trained = b.predictor, drafters(P)

    def build(folder):
        runs = run_jobs(P, synthesis_job, [SynthesisJob("calibration", i, P.seed + CALIBRATION_SEED + i, "ar")
                                           for i in range(len(samples(P, "calibration")))], "calibration synthesis")
        g = torch.cat([r.g for r in runs]).to(predictor.dtype)
        codes = torch.cat([r.codes for r in runs])
        states = teacher_forced_states(predictor, runs)                      # one pass: r, and h = norm(r)
        r, h = states[True], states[False]
        tables = {k: uncapped_table(d, r if d.prenorm else h, codes, max(P.tree_sizes), P.acceptance_width)
                  for k, d in trained.drafters.items()}
        save_tensors(folder / "tables.safetensors", tables)
        entropy, top = target_sharpness(predictor, h, sampler(P))
        pick = torch.linspace(0, len(codes) - 1, min(P.ceiling_frames, len(codes)), device=g.device).long()
        parts = run_jobs(P, ceiling_job, frame_blocks(g[pick], codes[pick]), "ideal drafter")
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
        ideal = torch.tensor(c["ceiling"], dtype=torch.float64, device="cpu")       # a host-side table, as `tables`
        ceiling_expected = {n: expected_tokens_per_step(greedy_tree(ideal, n), ideal) for n in P.tree_sizes}
        return Calibration(tables, trees, expected, c["entropy"], c["top_prob"], c["ceiling"], c["ceiling_covered"],
                           c["frames"], ceiling_expected)

    return cached(P, "calibration", build, load, name="calibration-uncapped")   # (width-8 tables: "calibration")


def diagnostics(P: RunParams) -> Diagnostics:
    """Per-position diagnostics (`helpers.method.diagnostics`) of every trained drafter on the teacher-forced
    validation frames; the ideal drafter on `ceiling_frames` of them. Saved as JSON, loaded as tensors."""
    b = backend(P)
    predictor, trained = b.predictor, drafters(P)

    def build(folder):
        g, _, codes = teacher_forced(P, "validation")
        pick = torch.linspace(0, len(codes) - 1, min(P.ceiling_frames, len(codes)), device=g.device).long()
        drafted = torch.cat([d for d, _ in run_jobs(P, ideal_job, frame_blocks(g[pick], codes[pick]), "ideal drafter")])
        d = compute_diagnostics(predictor, trained.drafters, g, codes, sampler(P), P.depth, ideal_frames=pick,
                                ideal_drafted=drafted, sizes=b.codebook_sizes)
        save_json(folder / "diagnostics.json", d.to_dict())

    return cached(P, "calibration", build, lambda folder: Diagnostics.from_dict(load_json(folder / "diagnostics.json")),
                   name="diagnostics")


def decoder(P: RunParams, kind: str, n: int) -> Decoder:
    """The speculative decoder of drafter `kind` with its calibrated tree of size n (on the backend's one core)."""
    b = backend(P)
    return Decoder(b.predictor, sampler(P), drafters(P).drafters[kind], calibration(P).trees[kind][n], core=b.core)


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
    replay_decoded: dict[str, dict[int, int]]      # frames decoded again (all if inexact, else the walk's check)
    replay_matches_synthesis: bool | None          # replay's calls == the full path's (None: frames not identical)
    replay_by_language: dict[str, dict[str, float]]   # measured tokens/step at tree_size per drafter and language

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

    return cached(P, "evaluation", build, load, name="syntheses")


@dataclass(frozen=True)
class DrafterJob:
    """One drafter's training at one learning rate of the sweep (early stopping on the validation role)."""
    kind: str
    lr: float


def drafter_job(P: RunParams, job: DrafterJob) -> tuple[dict, TrainResult]:
    """The trained weights (the kept epoch's) and the training record. Deterministic on its own (the drafters start
    from the code predictor's heads or from zeros, the batches from P.seed), so the kept drafters do not depend on
    how many processes trained them."""
    predictor = backend(P).predictor
    (_, codes), (_, codes_val) = (drafter_targets(P, role) for role in ("train", "validation"))
    cfg = TrainConfig(P.drafter_epochs, job.lr, P.drafter_batch_size, P.seed, P.drafter_patience,
                      sampler(P) if P.drafter_targets == "distributions" else None)
    drafter = make_drafter(job.kind, predictor, P.depth)
    h, h_val = (drafter_states(P, role, drafter.prenorm) for role in ("train", "validation"))
    result = train_drafter(drafter, h, codes, cfg, progress=False, val=(h_val, codes_val))
    return drafter.state_dict(), result


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
    """The AR evaluation runs `indices` decoded again by drafter `kind` at tree size n (`replay_calls`)."""
    kind, n, indices = job
    ar, _ = syntheses(P)
    return replay_calls(decoder(P, kind, n), [ar[i] for i in indices], [P.seed + i for i in indices], strict=P.exact)


REPLAY_CHUNK = 10                   # evaluation runs per replay job


def checked_runs(rows: list[Sample]) -> list[int]:
    """The evaluation runs decoded in full to check the walk (every drafter and N): the first of each language."""
    first = {}
    for i, s in enumerate(rows):
        first.setdefault(s.lang, i)
    return sorted(first.values())


def replayed(P: RunParams, configs: list[tuple[str, int]], ar: list[Synthesis]) -> tuple[dict, dict]:
    """Per config (drafter, N): its `Replay` over every AR evaluation run, and the frames decoded to get or check it.

    Exact inner loop: the walk over the recorded codes (`walk_calls`), checked against the decoder on `checked_runs`
    (same calls, same codes: else it raises). Otherwise every run is decoded again (`replay_calls`)."""
    rows = samples(P, "evaluation")
    if not P.exact:
        chunks = [list(range(i, min(i + REPLAY_CHUNK, len(ar)))) for i in range(0, len(ar), REPLAY_CHUNK)]
        parts = iter(run_jobs(P, replay_job, [(kind, n, c) for kind, n in configs for c in chunks], "replay"))
        out = {config: Replay.join([next(parts) for _ in chunks]) for config in configs}
        return out, {config: r.frames for config, r in out.items()}
    check = checked_runs(rows)
    decoded = dict(zip(configs, run_jobs(P, replay_job, [(kind, n, check) for kind, n in configs], "replay check")))
    out = walk_many({(kind, n): decoder(P, kind, n) for kind, n in configs}, ar, REPLAY_CHUNK)
    for (kind, n), walked in out.items():
        if decoded[kind, n].calls != [walked.calls[i] for i in check]:
            raise RuntimeError(f"{kind} at N={n}: the walk over the recorded codes and the decoder disagree on the calls "
                               f"of evaluation runs {check}")
    return out, {config: r.frames for config, r in decoded.items()}


def replayed_tokens_per_step(P: RunParams, dec: Decoder) -> float:
    """Tokens/step of any decoder on every AR evaluation frame, counted as `replayed` counts Table 2's (without its
    check): the walk where the inner loop is exact, else every frame decoded again."""
    ar, _ = syntheses(P)
    r = (walk_many({0: dec}, ar, REPLAY_CHUNK)[0] if P.exact
         else replay_calls(dec, ar, [P.seed + i for i in range(len(ar))], strict=False))
    return r.tokens_per_step(dec.predictor.num_codes)


def evaluation(P: RunParams) -> Evaluation:
    """The evaluation syntheses compared (frames, distribution) and replayed for every drafter and N (`replayed`).
    Never raises on a differing frame: with an inexact inner loop (P.exact False) differences are counted; with a
    float64 one the notebooks assert there are none (and replay raises on one, after the syntheses are saved)."""
    b = backend(P)
    rows = samples(P, "evaluation")
    ar, spec = syntheses(P)

    def build(folder):
        comparison, parity = compare_runs(ar, spec)
        configs = [(kind, n) for kind in P.drafters           # the main drafter at every N, the others at tree_size
                   for n in (P.tree_sizes if kind == main_drafter(P) else [P.tree_size])]
        runs, checked = replayed(P, configs, ar)
        replay, mismatched, decoded, matches, by_language = {}, {}, {}, None, {}
        for (kind, n), r in runs.items():
            if n == P.tree_size:
                by_language[kind] = r.tokens_per_step_by([s.lang for s in rows], b.predictor.num_codes)
            if (kind, n) == (main_drafter(P), P.tree_size) and comparison.identical_fraction == 1.0:
                matches = r.calls == [s.calls for s in spec]
            replay.setdefault(kind, {})[n] = r.tokens_per_step(b.predictor.num_codes)
            mismatched.setdefault(kind, {})[n] = r.mismatched
            decoded.setdefault(kind, {})[n] = checked[kind, n]
        save_json(folder / "evaluation.json", {"comparison": comparison.to_dict(), "parity": parity.to_dict(),
                                               "replay": replay, "replay_mismatched": mismatched,
                                               "replay_decoded": decoded, "replay_matches_synthesis": matches,
                                               "replay_by_language": by_language})

    def load(folder):
        e = load_json(folder / "evaluation.json")
        c, par = e["comparison"], e["parity"]
        def by_n(d):
            return {k: {int(n): v for n, v in d_k.items()} for k, d_k in d.items()}
        return Evaluation(rows, ar, spec, FrameComparison(c["frames_compared"], c["frames_identical"],
                                                              c["first_difference"], c["onset"]),
                          CodeParity(par["p_values"], tuple(par["samples"]), par["alpha"]),
                          by_n(e["replay"]), by_n(e["replay_mismatched"]), by_n(e["replay_decoded"]),
                          e["replay_matches_synthesis"], e["replay_by_language"])

    return cached(P, "evaluation", build, load, name="evaluation-replayed")   # (replayed by decoding only: "evaluation")


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
