"""The run's inner loop in every CPU deployment (dtype x matrix kernel, `measure.deployments`), side by side:
what `make bench` and notebook 06 show at the miniature's shape.

`deployment_comparison(P, trees, g, c0)`: the fused call per deployment and N (interleaved), whole frames (the
official generate per dtype, AR and speculative per deployment) and where the fastest speculative deployment's call
spends its time.
"""

from __future__ import annotations

import torch

from helpers.measure.machine import load_average, timed_on
from helpers.experiment.stages import stages
from helpers.experiment.run.backend_factory import backend, sampler
from helpers.experiment.run.params import RunParams
from helpers.measure.deployments import (DEPLOYMENTS, call_grid, call_phases, deployed, deployment_frames, in_torch,
                                        runnable)
from helpers.method.kernels import fits, unsupported
from helpers.method.sampler import frame_uniforms
from helpers.method.tree import SparseTree


def usable_deployments(*widths: int, names=DEPLOYMENTS) -> list[str]:
    """The deployments whose kernel runs on this CPU (`deployments.runnable`) and takes a code predictor of these
    input widths (`kernels.fits`)."""
    return [n for n in runnable(names) if fits(DEPLOYMENTS[n][1], *widths)]


def left_out(names: list[str]) -> dict[str, str]:
    """{deployment: why} for the deployments not among `names` (the usable ones)."""
    return {n: unsupported(DEPLOYMENTS[n][1]) or "its kernel does not take the code predictor's widths"
            for n in DEPLOYMENTS if n not in names}


@torch.no_grad()
def deployment_comparison(P: RunParams, trees: dict[int, SparseTree], g: torch.Tensor, c0: torch.Tensor,
                          frame_sizes=(4, 8, 16), rounds: int = 60, warmup: int = 10, seed: int = 0,
                          compiled_sizes=()) -> dict:
    """-> {"calls": `call_grid` (every N of trees), "frames": `deployment_frames` (N in frame_sizes), "phases":
    `call_phases` of the fastest speculative deployment whose calls run in torch (its N), "machine": `timed_on`}.
    g [F, H_talker], c0 [F]: real frames.
    compiled_sizes: N of the compiled (inductor) loops beside the eager ones, dense deployments only (~1 min each)."""
    b, start = backend(P), load_average()
    drafter = stages.drafters(P).drafters[stages.main_drafter(P)]
    names = usable_deployments(b.predictor.hidden_size, b.predictor.config.intermediate_size)
    systems = deployed(b.model.talker, drafter, P.depth, names)
    calls = call_grid(systems, trees, warmup, rounds, seed=seed)
    u = frame_uniforms(torch.Generator().manual_seed(seed), b.predictor.num_codes, batch=g.shape[0])
    frames = deployment_frames(systems, {n: trees[n] for n in frame_sizes if n in trees}, g, c0, u, sampler(P),
                               seed=seed, compiled_sizes=compiled_sizes, passes=P.timing_passes)
    spec = min((k for k in frames["systems"] if k.startswith("spec") and in_torch(k.split("@")[1].split("+")[0])),
               key=lambda k: frames["systems"][k]["frame_ms"])    # "spec<N>@<deployment>": phases are torch's
    n, name = int(spec.split("@")[0][4:]), spec.split("@")[1].removesuffix("+inductor")
    phases = {"deployment": name, "by_n": call_phases(systems[name][0], {n: trees[n]}, seed=seed)}
    return {"calls": calls, "frames": frames, "phases": phases, "deployments": names, "left_out": left_out(names),
            "machine": timed_on(start)}


FULL_SIZE_N = (4, 8, 16)             # small trees: where a verify call at the real shape costs about one AR call


@torch.no_grad()
def full_size_comparison(P: RunParams, trees: dict[int, SparseTree], g: torch.Tensor, c0: torch.Tensor,
                         identity_all: bool = False) -> dict:
    """The run's miniature at the real code predictor's size, every CPU deployment, whole frames
    (`measure.full_size_frames`: the table `metrics.json` keeps under "full_size"): the first `P.full_size_frames`
    of the real frames g [F, H_talker], c0 [F] timed in `P.timing_passes` passes, the headline counted on the
    first `P.full_size_identity_frames` (every speculative loop with `identity_all`), the trees of FULL_SIZE_N among
    `trees`, the run's main drafter; the
    paper's tokens/step (Figure 4's ceiling) projected through the frame model fitted on them."""
    from helpers.measure.full_size_frames import full_size_frames
    from helpers.report.paper import PAPER

    drafter = stages.drafters(P).drafters[stages.main_drafter(P)]
    names = [n for n in runnable() if n != "ort-float32"]     # the runtime's float32 reference: tested, not timed
    keep = max(P.full_size_frames, P.full_size_identity_frames)
    return full_size_frames(backend(P).model.talker, drafter, {n: trees[n] for n in FULL_SIZE_N if n in trees},
                            g[:keep], c0[:keep], sampler(P), names=names, seed=P.seed,
                            paper_tokens_per_step=PAPER["figure4_latency"]["acceptance_ceiling"],
                            frames=P.full_size_frames, passes=P.timing_passes,
                            identity_frames=P.full_size_identity_frames, identity_all=identity_all)
