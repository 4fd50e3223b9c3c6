"""Probe: does a wider code predictor give each code position its own region of hidden space?

On the real model (code predictor 1024 wide, 5 layers) the reused heads H_{t+j}(h_t) reach 1.70 tokens/step at N = 32,
Medusa heads 2.60 and K = 3 shared offsets H_{t+j}(h_t + b_j) 2.47; on the miniature (128 wide, 3 layers) reused 2.01,
Medusa 2.09, offsets 2.03: the reused heads are already near what any drafter can do. The hypothesis: a wide predictor
puts each position in its own region of hidden space (a head then reads another position's state badly, by a shift an
offset fixes), a narrow one cannot. Here fresh code predictors of several widths and depths (the official
`Qwen3TTSTalkerCodePredictorModelForConditionalGeneration`, the miniature's config otherwise: 4 heads of width / 4,
2 KV heads, MLP 3 x width, 256 codes) are trained on the miniature's frozen talker states (teacher-forced train frames,
CE on c1..c15 from the logits, Adam, one-cycle schedule, gradient clip 1, the weights of the lowest held-out CE per code
kept, stopped after `--patience` checks without a lower one), and each, with the shipped predictor as the baseline row,
is measured on its own draws (c1..c15 sampled from teacher-forced (g, c0) with the run's sampler, h teacher-forced over
them):

- held-out CE per code on the codec's validation codes;
- top-1 agreement with the draws by depth j = 1..3 of the own head (H_{t+j} on h_{t+j}) and the reused one (on h_t);
- the share of the displacement h_{t+j} - h_t one shared vector per depth explains (`diagnostics.translation_constancy`),
  and the share per-(t, j) means explain; the separation of the position means against the spread within a position;
- expected tokens/step at N = 32 (greedy tree over uncapped acceptance tables from the validation frames' own draws)
  of the reused heads, PositionOffsets and MedusaHeads (trained as the drafters stage trains them: the predictor's own
  draws on the train frames, its sampling distributions as soft labels, early stopping on the validation draws), and
  of the ideal drafter (`ceiling.drafter_ceiling` on `--ceiling-frames` validation frames).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/probes/predictor_proportions.py --out outputs/probes/predictor_proportions.json
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import helpers  # noqa: F401  (first: its numerical pins take effect only before numpy and torch load)
import torch
import torch.nn.functional as F
from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSTalkerCodePredictorConfig
from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSTalkerCodePredictorModelForConditionalGeneration

from helpers.experiment import stages
from helpers.experiment.params import load_params
from helpers.method.calibration import expected_tokens_per_step, greedy_tree, uncapped_table
from helpers.method.ceiling import drafter_ceiling
from helpers.method.diagnostics import own_drafts, rank0_drafts, score_drafts, translation_constancy
from helpers.method.drafters import make_drafter
from helpers.method.predictor import CodePredictor
from helpers.method.training import TrainConfig, sampled_targets, train_drafter

DRAFTERS = ("reused", "offsets", "medusa")


# -- fresh code predictors ---------------------------------------------------------------------------------------
def predictor_config(base: Qwen3TTSTalkerCodePredictorConfig, width: int, layers: int):
    """The shipped predictor's config with width (hidden, MLP 3 x width, head_dim width / heads) and layers changed."""
    d = base.to_dict()
    for key in ("model_type", "transformers_version"):
        d.pop(key, None)
    d.update(hidden_size=width, intermediate_size=3 * width, num_hidden_layers=layers,
             head_dim=width // base.num_attention_heads, layer_types=["full_attention"] * layers)
    return Qwen3TTSTalkerCodePredictorConfig(**d)


def fresh_predictor(base: CodePredictor, talker_config, width: int, layers: int, seed: int):
    """A randomly initialised official code predictor (float32) of this width and depth."""
    torch.manual_seed(seed)
    config = predictor_config(base.official.config, width, layers)
    return Qwen3TTSTalkerCodePredictorModelForConditionalGeneration(config, talker_config).float()


def teacher_forced_logits(official, e0: torch.nn.Embedding, g: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Logits of c1..c15 over [g, E0(c0), E1(c1), ..., E14(c14)]. g [B, H_talker], codes [B, 16] -> [B, 15, V]."""
    tables = official.model.codec_embedding
    x = torch.cat([g[:, None].to(e0.weight.dtype), e0(codes[:, :1])]
                  + [tables[i - 1](codes[:, i:i + 1]) for i in range(1, codes.shape[1] - 1)], dim=1)
    return official.forward_finetune(inputs_embeds=x).logits


@torch.no_grad()
def held_out_ce(official, e0, g: torch.Tensor, codes: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """CE per code position [15] (nats, mean over frames) of the codec's codes. g [F, H_talker], codes [F, 16]."""
    official.eval()
    total = sum(F.cross_entropy(teacher_forced_logits(official, e0, g[i:i + batch], codes[i:i + batch]).transpose(1, 2),
                                codes[i:i + batch, 1:], reduction="none").sum(0).double()
                for i in range(0, len(g), batch))
    return total / len(g)


def train_predictor(official, e0, train: tuple, val: tuple, args) -> dict:
    """Adam (one-cycle to `args.lr`, clip 1) on CE of c1..c15; the weights of the lowest held-out mean CE per code
    kept (checked every `args.val_every` steps, stopped after `args.patience` checks without a lower one).
    train, val: (g [F, H_talker] float32, codes [F, 16]). Returns the training record."""
    (g, codes), (gv, cv) = train, val
    params = list(official.parameters())
    optimizer = torch.optim.Adam(params, lr=args.lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, total_steps=args.steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(args.seed)
    history = [(0, float(held_out_ce(official, e0, gv, cv).mean()))]
    best, best_step, best_state = history[0][1], 0, copy.deepcopy(official.state_dict())
    order, pos, start = torch.randperm(len(g), generator=gen, device="cpu"), 0, time.perf_counter()
    for step in range(1, args.steps + 1):
        if pos + args.batch > len(g):
            order, pos = torch.randperm(len(g), generator=gen, device="cpu"), 0
        idx = order[pos:pos + args.batch]
        pos += args.batch
        official.train()
        logits = teacher_forced_logits(official, e0, g[idx], codes[idx])
        loss = F.cross_entropy(logits.flatten(0, 1), codes[idx, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        if step % args.val_every == 0 or step == args.steps:
            history.append((step, float(held_out_ce(official, e0, gv, cv).mean())))
            print(f"  step {step}: train {loss.item():.3f}, held-out {history[-1][1]:.4f}", flush=True)
            if history[-1][1] < best:
                best, best_step, best_state = history[-1][1], step, copy.deepcopy(official.state_dict())
            elif (step - best_step) // args.val_every >= args.patience:
                break
    official.load_state_dict(best_state)
    return {"best_step": best_step, "steps_run": step, "held_out_history": history,
            "train_seconds": round(time.perf_counter() - start, 1)}


# -- measurements on a predictor's own draws ---------------------------------------------------------------------
def own_draws(predictor: CodePredictor, g: torch.Tensor, codes: torch.Tensor, sampler, seed: int) -> torch.Tensor:
    """c0 as given, c1..c15 sampled by the AR decoder from each frame's (g, c0). g [F, H_talker], codes [F, 16] -> [F, 16]."""
    return sampled_targets(predictor, g, codes, sampler, torch.Generator().manual_seed(seed))


def states(predictor: CodePredictor, g: torch.Tensor, codes: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """h [F, 15, H] teacher-forced over codes [F, 16] from g [F, H_talker]."""
    return torch.cat([predictor.teacher_forced_hidden(g[i:i + batch], codes[i:i + batch])
                      for i in range(0, len(g), batch)])


@torch.no_grad()
def agreement(predictor: CodePredictor, drafters: dict, h: torch.Tensor, draws: torch.Tensor, sampler,
              depth: int) -> dict:
    """Top-1 agreement with the draws by depth [K] of the own head (H_{t+j} on h_{t+j}) and of every drafter (on h_t)."""
    drafts = {"own": own_drafts(predictor, h, depth), **{k: rank0_drafts(d, h) for k, d in drafters.items()}}
    _, scores = score_drafts(predictor, h, draws, sampler, drafts)
    return {k: s.by_depth()[1] for k, s in scores.items()}


@torch.no_grad()
def displacement_shares(h: torch.Tensor, depth: int) -> dict:
    """Per depth j [K]: the share of E|h_{t+j} - h_t|^2 (over frames and t) that one shared vector M_j explains, and that
    the per-(t, j) means m_{t,j} explain (1 - E|D - mean|^2 / E|D|^2). h [F, 15, H]."""
    h = h.double()
    per_position = []
    for j in range(1, depth + 1):
        disp = h[:, j:] - h[:, :-j]                                          # [F, 15 - j, H]
        per_position.append(float(1 - (disp - disp.mean(0)).pow(2).sum(-1).mean() / disp.pow(2).sum(-1).mean()))
    c = translation_constancy(h, depth)
    return {"shared": c.shared_share.tolist(), "per_position": per_position, "shared_norm": c.mean_norm.tolist(),
            "state_norm": c.state_norm}


@torch.no_grad()
def position_separation(h: torch.Tensor) -> dict:
    """How far apart the 15 position means of h_t lie against the spread within a position. h [F, 15, H].
    `pairwise_over_within`: mean distance between two position means / mean RMS distance of a state to its position's
    mean; `between_over_within`: variance of the position means / mean variance within a position (total, over dims)."""
    h = h.double()
    mu = h.mean(0)                                                            # [15, H]
    within = (h - mu).pow(2).sum(-1).mean(0)                                  # [15]: E|h_t - mu_t|^2
    pair = torch.cdist(mu, mu)
    n = mu.shape[0]
    pairwise = pair.sum() / (n * (n - 1))
    between = (mu - mu.mean(0)).pow(2).sum(-1).mean()
    return {"pairwise_over_within": float(pairwise / within.sqrt().mean()),
            "between_over_within": float(between / within.mean())}


def trained_drafters(predictor: CodePredictor, train: tuple, val: tuple, sampler, args) -> dict:
    """Reused heads, and PositionOffsets and MedusaHeads trained as the drafters stage trains them (soft labels: the
    predictor's sampling distributions on its own draws; early stopping on the held-out draws). train, val: (h, draws)."""
    out = {"reused": make_drafter("reused", predictor, args.depth)}
    for kind, lr in (("offsets", args.offsets_lr), ("medusa", args.medusa_lr)):
        d = make_drafter(kind, predictor, args.depth)
        cfg = TrainConfig(args.drafter_epochs, lr, 32, args.seed, args.drafter_patience, sampler)
        r = train_drafter(d, *train, cfg, progress=False, val=val)
        print(f"  {kind}: best epoch {r.best_epoch}, held-out {[round(v, 3) for v in r.val_loss]}", flush=True)
        out[kind] = d
    return out


def expected_rates(drafters: dict, h: torch.Tensor, draws: torch.Tensor, size: int) -> dict:
    """Expected tokens/step at tree size `size` per drafter: greedy tree over its uncapped acceptance table on (h, draws)."""
    out = {}
    for kind, d in drafters.items():
        a = uncapped_table(d, h, draws, size)
        out[kind] = expected_tokens_per_step(greedy_tree(a, size), a)
    return out


def ideal_rate(predictor: CodePredictor, g: torch.Tensor, draws: torch.Tensor, sampler, frames: int, depth: int,
               size: int) -> tuple[float, list]:
    """The ideal drafter's expected tokens/step at `size` (its exact-marginal table on `frames` evenly spaced frames)."""
    pick = torch.linspace(0, len(draws) - 1, min(frames, len(draws)), device=draws.device).long()
    table, _ = drafter_ceiling(predictor, g[pick], draws[pick], sampler, depth)
    return expected_tokens_per_step(greedy_tree(table, size), table), table.tolist()


def measure(predictor: CodePredictor, data: dict, sampler, args) -> dict:
    """Every measurement of one predictor. data: {"train"/"validation": (g [F, H_talker] float64, codes [F, 16])}."""
    t0 = time.perf_counter()
    draws = {role: own_draws(predictor, g, c, sampler, args.seed + i) for i, (role, (g, c)) in enumerate(data.items())}
    h = {role: states(predictor, data[role][0], draws[role]) for role in data}
    print(f"  draws and states in {time.perf_counter() - t0:.0f} s", flush=True)
    drafters = trained_drafters(predictor, (h["train"], draws["train"]), (h["validation"], draws["validation"]),
                                sampler, args)
    hv, dv = h["validation"], draws["validation"]
    rates = expected_rates(drafters, hv, dv, args.tree_size)
    ideal, ideal_table = ideal_rate(predictor, data["validation"][0], dv, sampler, args.ceiling_frames, args.depth,
                                    args.tree_size)
    gap = rates["medusa"] - rates["reused"]
    return {"top1": agreement(predictor, drafters, hv, dv, sampler, args.depth),
            "displacement": displacement_shares(hv, args.depth), "separation": position_separation(hv),
            "expected": {**rates, "ideal": ideal}, "ideal_table": ideal_table,
            "medusa_minus_reused": gap,
            "offsets_share_of_gap": (rates["offsets"] - rates["reused"]) / gap if abs(gap) > 1e-9 else None,
            "measure_seconds": round(time.perf_counter() - t0, 1)}


@torch.no_grad()
def check_wrapping(predictor: CodePredictor, e0, g: torch.Tensor, codes: torch.Tensor) -> float:
    """Largest difference of the official teacher-forced logits and the CodePredictor's on a few frames (float64)."""
    ref = teacher_forced_logits(predictor.official, e0, g, codes)
    mine = predictor.logits(predictor.teacher_forced_hidden(g, codes), range(1, predictor.num_codes + 1))
    return float((ref - mine).abs().max())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params/mini.yaml")
    ap.add_argument("--shapes", default="128x3,512x3,256x5,256x3,128x5", help="width x layers of the fresh predictors")
    ap.add_argument("--no-shipped", action="store_true", help="skip the shipped predictor's baseline row")
    ap.add_argument("--steps", type=int, default=500, help="most training steps per predictor (one-cycle length)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--val-every", type=int, default=50)
    ap.add_argument("--patience", type=int, default=3, help="held-out checks without a lower CE before stopping")
    ap.add_argument("--drafter-epochs", type=int, default=6)
    ap.add_argument("--drafter-patience", type=int, default=2)
    ap.add_argument("--offsets-lr", type=float, default=3e-3, help="the miniature's drafters stage's sweep pick")
    ap.add_argument("--medusa-lr", type=float, default=1e-3, help="the miniature's drafters stage's sweep pick")
    ap.add_argument("--ceiling-frames", type=int, default=12)
    ap.add_argument("--frames", type=int, default=0, help="keep the first frames of each role (0: all; smoke runs)")
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--out", default="outputs/probes/predictor_proportions.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    P = load_params(args.params)
    args.depth, args.tree_size = P.depth, P.tree_size
    sampler = stages.sampler(P)
    b = stages.backend(P)
    shipped = b.predictor
    data = {}
    for role in ("train", "validation"):
        g, _, codes = stages.teacher_forced(P, role)
        data[role] = (g[:args.frames or None], codes[:args.frames or None])
    e0_32 = copy.deepcopy(shipped.c0_embedding).float().requires_grad_(False)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"args": vars(args), "rows": []}
    shapes = [] if args.no_shipped else [None]
    shapes += [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s]
    for shape in shapes:
        start = time.perf_counter()
        if shape is None:
            print("shipped predictor", flush=True)
            predictor, row = shipped, {"name": "shipped", "training": None}
        else:
            width, layers = shape
            print(f"fresh predictor {width} x {layers}", flush=True)
            official = fresh_predictor(shipped, b.model.talker.config, width, layers, args.seed)
            as32 = {role: (g.float(), c) for role, (g, c) in data.items()}
            row = {"name": f"{width}x{layers}", "training": train_predictor(official, e0_32, as32["train"],
                                                                             as32["validation"], args)}
            predictor = CodePredictor(official.double().eval().requires_grad_(False), shipped.c0_embedding)
        official = predictor.official
        row.update(width=predictor.hidden_size, layers=len(predictor.layers),
                   params=sum(p.numel() for p in official.parameters()),
                   wrapping_max_diff=check_wrapping(predictor, shipped.c0_embedding, *(x[:8] for x in data["validation"])))
        row["held_out_ce"] = held_out_ce(official, shipped.c0_embedding, *data["validation"]).tolist()
        row["held_out_ce_mean"] = sum(row["held_out_ce"]) / len(row["held_out_ce"])
        print(f"  held-out CE per code {row['held_out_ce_mean']:.4f}", flush=True)
        row.update(measure(predictor, data, sampler, args))
        row["seconds"] = round(time.perf_counter() - start, 1)
        print(json.dumps({k: row[k] for k in ("name", "held_out_ce_mean", "top1", "displacement", "separation",
                                              "expected", "offsets_share_of_gap", "seconds")}), flush=True)
        result["rows"].append(row)
        out.write_text(json.dumps(result, indent=1))          # after every row: a cut run keeps what it measured


if __name__ == "__main__":
    main()
