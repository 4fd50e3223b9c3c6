"""Replaying the inner loop of a finished synthesis: tokens/step of any drafter and tree, exactly.

Speculative decoding is lossless: with the same seed it emits the AR run's codes, so the talker sees
the same frames and produces the same states g. Decoding each recorded frame again from (g, c0) with
the frame's own uniforms (regenerated from the seed, in order, as `InnerLoop` draws them) therefore
reproduces the model calls a full speculative synthesis would make, without re-running the talker.
The evaluation stage checks this against a full synthesis for the main configuration.

With a float32 or bf16 inner loop a replayed frame may round to other codes than the recorded one
(`strict=False`): its calls still count (they are what the decoder spent on that frame), and the frame
is counted as mismatched.

Where the inner loop is exact the calls need no decoding at all (`walk_calls`): every sample the decoder
draws on the accepted path is the recorded code, so a round rooted at c_t accepts the longest path of its
tree whose drafts (from the teacher-forced h_t) are the recorded c_{t+1}, c_{t+2}, ... One teacher-forced
pass over all frames and the rounds' own walk (`helpers.method.round.accept`, every frame at once) give the same
calls as `replay_calls`, frame for frame, at a small fraction of its cost (the evaluation stage checks the two
against each other and against the full synthesis).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

import torch

from helpers.method.decoding import Decoder
from helpers.method.drafters import top_candidates
from helpers.method.sampler import frame_uniforms
from helpers.method.round import accept, pack_query


@dataclass
class Replay:
    calls: list[list[int]]      # model calls per frame of each run
    mismatched: int             # frames whose replayed codes differ from the recorded ones
    frames: int

    @classmethod
    def join(cls, parts: list["Replay"]) -> "Replay":
        """The replays of consecutive chunks of runs as one, in order."""
        return cls([c for r in parts for c in r.calls], sum(r.mismatched for r in parts), sum(r.frames for r in parts))

    def tokens_per_step(self, num_codes: int) -> float:
        """Codes per inner call over every replayed frame: num_codes x frames / calls."""
        return num_codes * self.frames / sum(map(sum, self.calls))

    def tokens_per_step_by(self, labels: list, num_codes: int) -> dict:
        """`tokens_per_step` of each group of runs: labels, one per run (a language), -> {label: tokens/step}."""
        if len(labels) != len(self.calls):
            raise ValueError(f"one label per run: {len(labels)} labels for {len(self.calls)} runs")
        frames, calls = {}, {}
        for label, run in zip(labels, self.calls):
            frames[label] = frames.get(label, 0) + len(run)
            calls[label] = calls.get(label, 0) + sum(run)
        return {label: num_codes * frames[label] / calls[label] for label in frames}


@torch.no_grad()
def replay_calls(decoder: Decoder, runs: list, seeds: list[int], strict: bool = True) -> Replay:
    """Model calls per frame of each run (a `Synthesis`: codes [T, 16], g [T, H_talker]), decoded again by
    `decoder`; a frame whose codes differ raises (strict) or is counted."""
    p = decoder.predictor
    calls, mismatched = [], []
    for run, seed in zip(runs, seeds, strict=True):
        generator = torch.Generator().manual_seed(seed)
        per_frame = []
        for f in range(run.codes.shape[0]):
            u = frame_uniforms(generator, p.num_codes, batch=1, device=p.device)
            result = decoder.decode_frame(run.g[f:f + 1].to(p.device, p.dtype), run.codes[f:f + 1, 0].to(p.device), u)
            mismatched.append((result.codes[0] != run.codes[f, 1:].to(p.device)).any())   # on the device, no sync
            per_frame.append(result.calls)
        calls.append(per_frame)
    count = int(torch.stack(mismatched).sum()) if mismatched else 0
    if strict and count:
        raise RuntimeError(f"replay gave other codes than the recorded runs on {count} of {len(mismatched)} frames: "
                           "g or the uniforms do not match the synthesis")
    return Replay(calls, count, len(mismatched))


@torch.no_grad()
def walk_calls(decoder: Decoder, runs: list, states: torch.Tensor | None = None) -> Replay:
    """Model calls per frame of each run (a `Synthesis`: codes [T, 16], g [T, H_talker]) for a decoder that emits
    the recorded codes (an exact inner loop): each root position's round walked (`accept`) over the recorded codes
    for every frame at once, with drafts from the teacher-forced states. Nothing is decoded, so `mismatched` is 0 by
    construction.

    states: the runs' teacher-forced h [F, 15, H] (r for a prenorm drafter; `teacher_forced_states`), where the
    caller has them: the pass is most of the cost, and one serves every decoder on the same predictor."""
    p, d = decoder.predictor, decoder.drafter
    codes = torch.cat([r.codes for r in runs]).to(p.device)                                  # [F, 16]
    if states is None:
        states = teacher_forced_states(p, runs)[d.prenorm]
    if states.shape[:2] != (codes.shape[0], p.num_codes):
        raise ValueError(f"states must be [{codes.shape[0]}, {p.num_codes}, H] for these runs, got {tuple(states.shape)}")
    n = p.num_codes
    next_t = {}                                              # per root t: each frame's next root after its round
    for t in range(1, n):
        ix = decoder.index(t)                                # the nodes a round rooted at c_t may accept
        if ix is None:
            next_t[t] = torch.full((codes.shape[0],), t + 1, device=codes.device)
            continue
        cand = top_candidates(d, states[:, t - 1], t, ix.depth_max, ix.width)                     # [F, D, m]
        tokens = pack_query(ix, codes[:, t], cand)                                                      # [F, q]
        ys = codes.index_select(1, t + 1 + ix.depth)              # [F, q]: the recorded code each token's sample draws
        next_t[t] = t + 1 + ix.depth.index_select(0, accept(tokens, ys, ix))
    next_t = {t: v.tolist() for t, v in next_t.items()}
    per_frame = []
    for f in range(codes.shape[0]):
        t, calls = 1, 1                                         # the prefill call samples c_1
        while t < n:
            t, calls = next_t[t][f], calls + 1
        per_frame.append(calls)
    frames = iter(per_frame)
    return Replay([list(islice(frames, r.codes.shape[0])) for r in runs], 0, len(per_frame))


def walk_many(decoders: dict, runs: list, chunk: int = 10) -> dict:
    """`walk_calls` of several decoders on one predictor over the same runs: {key: Replay}. `chunk` runs at a time,
    each chunk's teacher-forced pass shared by every decoder (the states of a large set never sit in memory at once)."""
    parts = {key: [] for key in decoders}
    for i in range(0, len(runs), chunk):
        states = teacher_forced_states(next(iter(decoders.values())).predictor, runs[i:i + chunk])
        for key, dec in decoders.items():
            parts[key].append(walk_calls(dec, runs[i:i + chunk], states[dec.drafter.prenorm]))
    return {key: Replay.join(p) for key, p in parts.items()}


@torch.no_grad()
def teacher_forced_states(predictor, runs: list) -> dict[bool, torch.Tensor]:
    """{False: h, True: r} [F, 15, H] over every recorded frame of the runs, from one teacher-forced pass (h is
    the final norm of r)."""
    codes = torch.cat([r.codes for r in runs]).to(predictor.device)
    g = torch.cat([r.g for r in runs]).to(predictor.device, predictor.dtype)
    r = predictor.teacher_forced_hidden(g, codes, prenorm=True)
    return {False: predictor.final_norm(r), True: r}
