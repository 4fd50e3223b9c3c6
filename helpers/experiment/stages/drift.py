"""The positional mismatch on a controlled model: a tiny official talker whose hidden state drifts along the frame
by a known amount (`TinyTalkerSpec.position_ramp`), offsets trained there the project's way
(`helpers.method.training.train_drafter`), and how much of the mismatch they close (notebook 02, "The mismatch, then
the fix"; `helpers.report.nb02_drafters.drift_md` says it in words)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker, random_frame_inputs
from helpers.method.decoding import Decoder
from helpers.method.diagnostics import Diagnostics, diagnostics, own_head_loss, share_closed
from helpers.method.drafters import OFFSET_KINDS, PositionOffsets, PreNormOffsets, ReusedHeads
from helpers.method.predictor import CodePredictor
from helpers.method.sampler import SamplerConfig, frame_uniforms
from helpers.method.training import TrainConfig, train_drafter


DRIFT_SPEC = TinyTalkerSpec(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, vocab_size=64,
                            talker_hidden_size=64, logit_scale=10.0, position_ramp=2.0)


@dataclass
class DriftRecovery:
    """Held-out draft cross-entropy (`Drafter.loss`: summed over depths, per frame) of the reused heads, both
    trained offset variants (after and before the final norm) and the own heads (no mismatch), the diagnostics of
    the held-out frames, the spec."""

    loss: dict[str, float]
    diagnostics: Diagnostics
    spec: TinyTalkerSpec
    frames: tuple[int, int]                 # (train, held out)

    def loss_gap_closed(self, kind: str = "offsets") -> float:
        """(reused - kind) / (reused - own) of the draft cross-entropy: the share of the mismatch an offset variant
        closes."""
        return share_closed(self.loss["reused"], self.loss[kind], self.loss["own"])

    def to_dict(self) -> dict:
        return {"loss": self.loss, "loss_gap_closed": {k: self.loss_gap_closed(k) for k in OFFSET_KINDS},
                "acceptance_gap_closed": {k: self.diagnostics.gap_closed(k) for k in OFFSET_KINDS},
                "position_ramp": self.spec.position_ramp, "frames": list(self.frames),
                "diagnostics": self.diagnostics.to_dict()}


def drift_recovery(spec: TinyTalkerSpec = DRIFT_SPEC, train_frames: int = 2000, held_frames: int = 200,
                   train: TrainConfig = TrainConfig(epochs=4, lr=1e-2), seed: int = 0,
                   sampler: SamplerConfig = SamplerConfig(), depth: int = 3) -> DriftRecovery:
    """Build the tiny talker (float32, CPU), decode train + held frames AR from random talker states, train the
    offsets (both variants) on the teacher-forced train frames and score reused heads, offsets and own heads on the
    held ones."""
    predictor = CodePredictor.from_talker(build_tiny_talker(spec, seed=seed, dtype=torch.float32))
    gen = torch.Generator().manual_seed(seed)
    n = train_frames + held_frames
    g, c0 = random_frame_inputs(spec.talker_hidden_size, spec.talker_vocab_size, n, gen, torch.float32)
    ar = Decoder(predictor, sampler)
    codes = torch.cat((c0[:, None], ar.decode_frame(g, c0, frame_uniforms(gen, batch=n)).codes),
                      dim=1)
    r = predictor.teacher_forced_hidden(g, codes, prenorm=True)
    h = predictor.final_norm(r)
    fit, held = slice(0, train_frames), slice(train_frames, n)
    drafters = {"reused": ReusedHeads(predictor, depth), "offsets": PositionOffsets(predictor, depth),
                "offsets_prenorm": PreNormOffsets(predictor, depth)}
    state = {k: r if d.prenorm else h for k, d in drafters.items()}
    for kind in OFFSET_KINDS:
        train_drafter(drafters[kind], state[kind][fit], codes[fit], train, progress=False)
    with torch.no_grad():
        loss = {k: float(d.loss(state[k][held], codes[held])) for k, d in drafters.items()}
    loss["own"] = float(own_head_loss(predictor, h[held], codes[held], depth))
    return DriftRecovery(loss, diagnostics(predictor, drafters, g[held], codes[held], sampler, depth), spec,
                         (train_frames, held_frames))
