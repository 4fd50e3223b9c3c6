"""The miniature's inner loop as a few shipped files: what a GPU benchmark reads, so that a bare CUDA machine trains
nothing and needs no espeak (`make bench-gpu`, docs/gpu.md).

    python -m helpers.experiment.bench.inner_loop_pack [--params params/mini.yaml] [--out outputs/gpu-pack]

writes, from the run's cached stages (built if absent, as `make run` builds them):
    talker.json, talker.safetensors   the official talker's config and the weights the inner loop reads (its code
                                      predictor, and the codec embedding that embeds c0), loaded into the `qwen_tts`
                                      classes
    drafters.safetensors              the trained drafters' parameters, by kind (keys "<kind>.<name>"; Medusa's heads
                                      only where Medusa is the run's main drafter)
    calibration.json                  the acceptance tables a[d][r] and greedy trees per drafter and N, the sampler
    frames.safetensors                g [F, H_talker], c0 [F] of the teacher-forced validation frames
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch

from helpers.adapter.global_rng import global_rng
from helpers.artifacts import load_json, load_tensors, save_json, save_tensors
from helpers.method.drafters import Drafter, make_drafter
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig
from helpers.method.tree import SparseTree

INNER_LOOP = ("code_predictor.", "model.codec_embedding.")       # the talker's weights the inner loop reads
FILES = ("talker.json", "talker.safetensors", "drafters.safetensors", "calibration.json", "frames.safetensors")


@dataclass
class InnerLoopPack:
    """A loaded pack: predictor (float32 unless asked), drafters {kind: Drafter}, tables {kind: a [K, width]},
    trees {kind: {N: SparseTree}}, main (the run's main drafter), sampler, g [F, Ht], c0 [F], and the official
    talker the predictor runs."""

    predictor: CodePredictor
    drafters: dict[str, Drafter]
    tables: dict[str, torch.Tensor]
    trees: dict[str, dict[int, SparseTree]]
    main: str
    sampler: SamplerConfig
    g: torch.Tensor
    c0: torch.Tensor
    talker: torch.nn.Module


def write_pack(params: str, out: str | Path, frames: int = 100) -> Path:
    """The pack of the run of `params` (its stages built where absent) into the folder `out`."""
    from helpers.experiment.stages import stages
    from helpers.experiment.run.backend_factory import backend, sampler
    from helpers.experiment.run.params import load_params

    P = load_params(params)
    b = backend(P)
    talker = b.model.talker
    trained, cal = stages.drafters(P), stages.calibration(P)
    g, _, codes = stages.teacher_forced(P, "validation")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_tensors(out / "talker.safetensors", {k: v.detach().float().contiguous() if v.is_floating_point() else v
                                              for k, v in talker.state_dict().items() if k.startswith(INNER_LOOP)})
    save_json(out / "talker.json", talker.config.to_dict())
    main = stages.main_drafter(P)
    kept = [k for k in trained.drafters if k != "medusa" or k == main]      # Medusa's 45 heads: 6 MB, not timed
    save_tensors(out / "drafters.safetensors", {f"{kind}.{name}": p.detach().float().contiguous()
                                                for kind in kept for name, p in trained.drafters[kind].state_dict()
                                                .items()})
    s = sampler(P)
    save_json(out / "calibration.json", {
        "main": main, "depth": P.depth, "drafters": kept, "tables": {k: t.tolist() for k, t in cal.tables.items()},
        "trees": {k: {str(n): [list(p) for p in t.paths] for n, t in by_n.items()} for k, by_n in cal.trees.items()},
        "sampler": {"top_k": s.top_k, "top_p": s.top_p, "temperature": s.temperature}, "params": params})
    save_tensors(out / "frames.safetensors", {"g": g[:frames].float().contiguous(),
                                              "c0": codes[:frames, 0].contiguous()})
    return out


def load_pack(folder: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
              ) -> InnerLoopPack:
    """A pack written by `write_pack`, its model built with the official `qwen_tts` classes on `device` in `dtype`."""
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSTalkerConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSTalkerForConditionalGeneration

    folder = Path(folder)
    missing = [f for f in FILES if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} is not an inner-loop pack: missing {', '.join(missing)} (write one with "
                                f"python -m helpers.experiment.bench.inner_loop_pack)")
    with global_rng(0):                  # the talker's own layers (unused by the inner loop): a fixed random init
        talker = Qwen3TTSTalkerForConditionalGeneration(Qwen3TTSTalkerConfig(**load_json(folder / "talker.json")))
    result = talker.load_state_dict(load_tensors(folder / "talker.safetensors"), strict=False)
    unread = [k for k in result.missing_keys if k.startswith(INNER_LOOP)]
    if result.unexpected_keys or unread:
        raise ValueError(f"{folder / 'talker.safetensors'} does not fit its talker.json: unexpected "
                         f"{result.unexpected_keys[:3]}, missing {unread[:3]}")
    talker = talker.eval().to(device=device, dtype=dtype)
    predictor = CodePredictor.from_talker(talker)
    cal = load_json(folder / "calibration.json")
    params = load_tensors(folder / "drafters.safetensors")
    drafters = {}
    for kind in cal["drafters"]:
        d = make_drafter(kind, predictor, cal["depth"])
        d.load_state_dict({name.split(".", 1)[1]: p for name, p in params.items() if name.startswith(kind + ".")})
        drafters[kind] = d.to(device)
    tables = {k: torch.tensor(t, dtype=torch.float64, device="cpu") for k, t in cal["tables"].items()}  # host tables
    trees = {k: {int(n): SparseTree([tuple(p) for p in paths]) for n, paths in by_n.items()}
             for k, by_n in cal["trees"].items()}
    frames = load_tensors(folder / "frames.safetensors")
    return InnerLoopPack(predictor, drafters, tables, trees, cal["main"], SamplerConfig(**cal["sampler"]),
                         frames["g"].to(device, dtype), frames["c0"].to(device), talker)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params/mini.yaml")
    ap.add_argument("--out", default="outputs/gpu-pack")
    ap.add_argument("--frames", type=int, default=100)
    args = ap.parse_args(argv)
    print(f"wrote {write_pack(args.params, args.out, args.frames)}")


if __name__ == "__main__":
    main()
