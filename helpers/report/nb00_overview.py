"""Notebook 00 (overview): what the drafters cost, one frame of the miniature decoded step by step, and the toy
round by hand: a toy code predictor (vocabulary 4, K = 2, a tree of 3 nodes) decoded with everything printed
(`helpers.method.reference_round`), the descent check at every node with children, and the try-it cell.

    dec = toy_decoder(seed=0); g, c0, u = toy_frame(seed=0)
    walk = reference_frame(dec, g, c0, u)                       # helpers.method.reference_round
    head, rows, walk_text = round_text(walk["rounds"][0], 1)     # a round's heading, node rows, walk and commit
    check = descent_rows(walk, draws=20000, seed=0)              # {"rows", "residuals", "worst"} (raises on a miss)
    toy_round_rows(tree="0; 1; 0,0", depth=2)                    # the try-it cell: the same frame, any tree
"""

from __future__ import annotations

import torch
from torch import nn

from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker, random_frame_inputs
from helpers.method.decoding import Decoder
from helpers.method.drafters import DRAFTERS, make_drafter
from helpers.method.predictor import CodePredictor
from helpers.method.reference_round import acceptance_check, node_targets, reference_frame
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.method.tree import SparseTree
from helpers.report.tables import markdown


def real_shape_predictor() -> CodePredictor:
    """The Qwen3-TTS-12Hz-0.6B code predictor's shape on the meta device (no memory, no weights).

    qwen_tts's default code-predictor config (hidden 1024, 5 layers, vocab 2048) with the 12 Hz model's
    16 code groups; the talker's codec embedding E0 is 3072 x 1024.
    """
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSTalkerConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSTalkerCodePredictorModelForConditionalGeneration

    config = Qwen3TTSTalkerConfig()
    config.code_predictor_config.num_code_groups = config.num_code_groups = 16
    with torch.device("meta"):
        official = Qwen3TTSTalkerCodePredictorModelForConditionalGeneration(config.code_predictor_config, config)
        return CodePredictor(official, nn.Embedding(config.vocab_size, config.hidden_size), max_query=65)


def parameter_total(module: torch.nn.Module) -> int:
    """The number of parameters of `module` (every tensor of `module.parameters()`, shared ones once)."""
    return sum(p.numel() for p in module.parameters())


def parameter_counts(predictor: CodePredictor, depth: int = 3) -> list[dict]:
    """Rows: the code predictor, then each drafter's added parameters (absolute and relative to the predictor)."""
    with torch.device(predictor.device):
        base = parameter_total(predictor.official)
        rows = [{"module": "code predictor (frozen)", "parameters": base, "of predictor": 1.0}]
        for kind in DRAFTERS:
            added = make_drafter(kind, predictor, depth).added_params
            rows.append({"module": f"drafter: {kind}", "parameters": added, "of predictor": added / base})
    return rows


def frame_walkthrough(predictor: CodePredictor, g: torch.Tensor, c0: torch.Tensor, drafter_kind: str = "reused",
                      depth: int = 3, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """One frame decoded twice from the same uniforms: AR (15 calls) and speculative with a chain tree of `depth`.

    g [1, H_talker], c0 [1]. Returns (AR rows: call, code position, code; speculative rows: round, start
    position, drafts, accepted, codes emitted). Both emit the same c1..c15 (checked).
    """
    sampler = SamplerConfig()
    u = frame_uniforms(torch.Generator().manual_seed(seed), predictor.num_codes, batch=1, device=predictor.device)
    ar = Decoder(predictor, sampler).decode_frame(g, c0, u).codes[0].tolist()
    spec = Decoder(predictor, sampler, make_drafter(drafter_kind, predictor, depth),
                   SparseTree.chain(depth)).decode_frame(g, c0, u)
    if spec.codes[0].tolist() != ar:
        raise RuntimeError("speculative and AR decoding of the same frame differ: losslessness broken")
    ar_rows = [{"call": t, "position": f"c{t}", "code": code} for t, code in enumerate(ar, 1)]
    spec_rows = [{"round": 0, "feeds": "g, c0 (prefill)", "top-1 drafts": "-", "accepted": "-", "emitted": f"c1={ar[0]}"}]
    drafts, t = {start: cand for start, cand in spec.drafts}, 1
    for i, accepted in enumerate(spec.accepted, 1):
        cand = drafts.get(t)
        spec_rows.append({"round": i, "feeds": f"c{t}" + ("" if cand is None else " + drafts"),
                          "top-1 drafts": "-" if cand is None else cand[:, 0].tolist(), "accepted": accepted,
                          "emitted": ", ".join(f"c{t + 1 + k}={c}" for k, c in enumerate(ar[t:t + accepted + 1]))})
        t += accepted + 1
    return ar_rows, spec_rows


def miniature_origin(build_s: dict, preset: str, build_seed: int, cache: str, shipped: list[str] = (),
                     built_on: str = "measured on the machine that built the miniature") -> str:
    """Notebook 00's sentence on where the miniature came from and how long its build took. build_s: seconds per
    build step ({"speech", "codec", "model"}: `Mini.history["build_s"]`, None for a step built before timing);
    shipped: the steps copied from the trained miniature committed with the repository (`Mini.history["shipped"]`);
    built_on: where the times were measured (`helpers.report.nb01_data.built_on`)."""
    if not build_s:
        raise ValueError("build_s: the miniature's seconds per build step, e.g. {'speech': 19.4, ...}; got nothing")
    timed = {k: v for k, v in build_s.items() if v is not None}
    took = (", ".join(f"{k} {v:.0f} s" for k, v in timed.items()) + f" ({sum(timed.values()) / 60:.1f} min in all)"
            if timed else "not timed (built before build times were recorded)")
    untimed = [k for k, v in build_s.items() if v is None]
    here = [k for k in build_s if k not in shipped]
    here_on = "measured on the machine that ran this run's build step"
    where = "; ".join(part for part in (f"{' and '.join(shipped)} {built_on}" if shipped else "",
                                        f"{', '.join(here)} {here_on}" if here else "") if part)
    origin = (f" The {' and '.join(shipped)} steps were trained by `make mini` and ship with the repository "
              "(`mini_trained`): they were copied because their keys, which hash every build parameter and the "
              "speech's content, are the ones this code builds; their times below are that build's."
              if shipped else "")
    return (f"**Where the miniature comes from.** Preset `{preset}`, `mini_build_seed` {build_seed}: espeak-ng speech "
            "of synthetic sentences in the run's languages, an RVQ codec fitted to it, and the official Qwen3-TTS "
            "classes trained on its codes. It is built once, before the first notebook, as the runner's own step "
            "(`python -m helpers PARAMS --build` runs only that step; a notebook opened without the runner builds it "
            f"on first use), and cached in `{cache}`.{origin} Its build took ({where}): {took}"
            + (f"; {', '.join(untimed)} not timed" if untimed and timed else "") + ".")


TOY_SPEC = TinyTalkerSpec(hidden_size=16, num_heads=2, num_kv_heads=2, head_dim=8, vocab_size=4, num_code_groups=6,
                          logit_scale=3.0, position_ramp=2.0)


TOY_TREE = ((0,), (1,), (0, 0))         # two candidates for the first drafted code, one for the second


def toy_decoder(seed: int = 0, depth: int = 2, tree=TOY_TREE, sampler: SamplerConfig | None = None
                ) -> Decoder:
    """An official tiny talker (vocabulary 4, codes c1..c5, float64) with reused heads as drafter, K = `depth`,
    the deployed sampler unless `sampler` is given."""
    predictor = CodePredictor.from_talker(build_tiny_talker(TOY_SPEC, seed=seed), max_query=len(tree) + 1)
    return Decoder(predictor, sampler or SamplerConfig(), make_drafter("reused", predictor, depth), SparseTree(tree))


def toy_frame(seed: int = 0, num_codes: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A frame's inputs: g [1, H_talker], c0 [1] (random stand-ins for the talker) and uniforms u [1, num_codes]."""
    gen = torch.Generator().manual_seed(seed)
    g, c0 = random_frame_inputs(TOY_SPEC.talker_hidden_size, TOY_SPEC.talker_vocab_size, 1, gen)
    return g, c0, frame_uniforms(gen, num_codes, batch=1)


NODE_COLUMNS = ("index", "path", "fed", "token", "predicts", "p", "cdf", "u column", "u", "draw", "on path")


MAX_Z = 4.0                       # the empirical frequencies must lie within this many binomial standard errors


def round_text(rnd: dict, number: int) -> tuple[str, list[dict], str]:
    """Round `number` (from 1) of a walkthrough: its heading (root, cache slot, drafts or "no tree"), its node rows
    (NODE_COLUMNS) and its walk (each step's draw and descent, the accepted drafts, the codes and KV entries kept)."""
    t = rnd["t"]
    head = f"**Round {number}**: root c{t} = {rnd['nodes'][0]['token']} at cache slot {rnd['cache length']}. "
    if rnd["drafts"] is None:
        head += f"No tree: c{t + 1} is the frame's last code, so this is one plain (AR) call."
    else:
        head += ("Drafts (row = drafted position, column = rank): "
                 + "; ".join(f"c{t + 1 + d}: {row}" for d, row in enumerate(rnd["drafts"]))
                 + f". The query is the root and {len(rnd['nodes']) - 1} nodes, one call.")
    rows = [{k: nd[k] for k in NODE_COLUMNS} for nd in rnd["nodes"]]
    steps = [f"at {rnd['nodes'][s['at']]['path']} the draw is {s['sample']}; children carry "
             f"{s['children tokens'] or 'nothing'}"
             + (f" -> descend to query index {s['descend to']}" if s["descend to"] != "stop" else " -> stop")
             for s in rnd["walk"]]
    emitted = ", ".join(f"{k}={v}" for k, v in rnd["emitted"].items())
    text = "Walk: " + "; ".join(steps) + f". Accepted drafts: {rnd['accepted']}; committed codes: {emitted}."
    if "committed" in rnd:
        text += (" KV entries kept: " + ", ".join(f"{k} <- {v}" for k, v in rnd["committed"].items())
                 + f". Next round's drafts: {rnd['next drafts from']}.")
    return head, rows, text


def descent_rows(walk: dict, draws: int = 20000, seed: int = 0, round_index: int = 0) -> dict:
    """At every node with children of one round: the descent probability in closed form, by the SpecInfer recursion
    and over `draws` uniforms, and the residual on a miss (`helpers.method.reference_round.acceptance_check`). Raises unless every node passes
    (within MAX_Z standard errors, closed form equal to the recursion).
    -> {"rows": [...], "residuals": [...], "worst": the largest |empirical - exact| / SE}."""
    rows, residuals, worst = [], [], 0.0
    nodes = walk["rounds"][round_index]["nodes"]
    for i, p, children in node_targets(walk, round_index):
        a = acceptance_check(p, children, draws=draws, seed=seed)
        if not (a["ok"] and a["closed form equal"]):
            raise AssertionError(f"the descent at node {nodes[i]['path']} does not hold: {a}")
        z = abs(a["empirical"] - a["exact"]) / a["se"] if a["se"] > 0 else 0.0
        worst = max(worst, z)
        rows.append({"node": nodes[i]["path"], "children tokens": children, "sum p over children": a["exact"],
                     "SpecInfer accept": a["specinfer"], f"empirical ({draws:,})": a["empirical"],
                     "binomial SE": a["se"], "diff / SE": z})
        residuals.append({"node": nodes[i]["path"], "p restricted, renormalised": a["residual"],
                          "SpecInfer residual": a["specinfer residual"],
                          "empirical given a miss": a["empirical residual"], "misses": a["misses"]})
    return {"rows": rows, "residuals": residuals, "worst": worst}


def rows_markdown(rows: list[dict], digits: int = 3) -> str:
    """A Markdown table of `rows` with every float written with `digits` decimals (lists of floats as "[a, b]")."""
    def r(x):
        if isinstance(x, float):
            return f"{x:.{digits}f}"
        return "[" + ", ".join(str(r(y)) for y in x) + "]" if isinstance(x, list) else x
    return markdown([{k: r(v) for k, v in row.items()} for row in rows])


def parse_tree(text: str) -> tuple[tuple[int, ...], ...]:
    """"0; 1; 0,0" -> ((0,), (1,), (0, 0)): paths of draft ranks, one per node, separated by ';'."""
    try:
        paths = tuple(tuple(int(r) for r in p.split(",")) for p in text.split(";") if p.strip())
    except ValueError:
        raise ValueError(f"a tree is paths of ranks like '0; 1; 0,0' (';' between nodes), not {text!r}") from None
    if not paths or any(not p or min(p) < 0 for p in paths) or any(p[:-1] and p[:-1] not in paths for p in paths):
        raise ValueError(f"every node's parent must be in the tree and ranks must be >= 0: {text!r}")
    return paths


def toy_round_rows(tree, depth: int = 2, temperature: float = 1.0, seed: int = 0) -> str:
    """The toy frame of notebook 00 decoded with `tree` (paths of ranks, or the text `parse_tree` reads), `depth`
    drafts per round and the sampler at `temperature`: one row per round (root, drafts, accepted, committed codes),
    then the calls against AR's and whether the codes are AR's (they always are: the walkthrough raises if not)."""
    paths = parse_tree(tree) if isinstance(tree, str) else tuple(tuple(p) for p in tree)
    if max(len(p) for p in paths) > depth:
        raise ValueError(f"the tree reaches depth {max(len(p) for p in paths)}, deeper than K = {depth} drafts: raise "
                         "depth or type a shallower tree")
    dec = toy_decoder(seed=seed, depth=depth, tree=paths, sampler=SamplerConfig(temperature=temperature))
    g, c0, u = toy_frame(seed=seed)
    walk = reference_frame(dec, g, c0, u)
    rows = [{"round": r, "root": f"c{rnd['t']}", "drafts (per depth, by rank)": rnd["drafts"] or "none (last code)",
             "accepted drafts": rnd["accepted"], "committed": ", ".join(f"{k}={v}" for k, v in rnd["emitted"].items())}
            for r, rnd in enumerate(walk["rounds"], 1)]
    n = dec.predictor.num_codes
    return (f"Tree {list(paths)}, K = {depth}, temperature {temperature}, seed {seed}: the prefill and "
            f"{len(walk['rounds'])} rounds, {1 + len(walk['rounds'])} calls where AR makes {n}; codes "
            f"{walk['codes']} {'equal' if walk['codes'] == walk['ar_codes'] else 'DIFFER FROM'} AR's "
            f"{walk['ar_codes']}.\n\n" + markdown(rows))


def show_toy_round(tree, depth: int = 2, temperature: float = 1.0, seed: int = 0) -> None:
    """Notebook 00's try-it cell: display `toy_round_rows` (what `helpers.experiment.run.controls.show` re-renders)."""
    from IPython.display import Markdown, display
    display(Markdown(toy_round_rows(tree, int(depth), temperature, int(seed))))


def toy_frame_md(decoder, walk: dict) -> str:
    """The toy frame's setting and uniforms, then the prefill's inverse-CDF draw of c1, each with its table (notebook
    00; `decoder` as `toy_decoder` builds it, `walk` from `reference_frame`)."""
    p, s, c1 = decoder.predictor, decoder.sampler, walk["c1"]
    return "\n\n".join([
        f"Vocabulary {p.vocab_size}, codes c1..c{p.num_codes}, K = {decoder.drafter.depth}, tree nodes "
        f"{decoder.tree.paths}; sampler: temperature {s.temperature}, top-k {s.top_k} (keeps "
        f"{min(s.top_k, p.vocab_size)} of {p.vocab_size} tokens). The frame's uniforms, drawn before any call, one per "
        "code position (u_t belongs to c_t whichever call produces it):",
        rows_markdown([{f"u{t}": x for t, x in enumerate(walk["u"], 1)}]),
        f"**Prefill** commits `g` and `c0` (slots 0 and 1) and gives the target for c1. Inverse CDF: c1 is the first "
        f"token whose CDF exceeds u1 = {c1['u']:.3f}, so c1 = {c1['draw']} (interval [{c1['interval'][0]:.3f}, "
        f"{c1['interval'][1]:.3f})).",
        rows_markdown([{"token": v, "p": c1["p"][v], "cdf": c1["cdf"][v]} for v in range(len(c1["p"]))])])


def ar_frame_md(decoder, walk: dict) -> str:
    """The same toy frame decoded autoregressively beside the speculative codes, position by position."""
    same = walk["codes"] == walk["ar_codes"]
    return (f"**The same frame, autoregressively** ({decoder.predictor.num_codes} calls instead of "
            f"{1 + len(walk['rounds'])}): {'code for code equal' if same else 'DIFFERENT'}.\n\n"
            + rows_markdown([{"position": f"c{t}", "speculative": s, "AR": a, "equal": s == a}
                             for t, (s, a) in enumerate(zip(walk["codes"], walk["ar_codes"]), 1)]))
