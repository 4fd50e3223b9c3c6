"""Training works: offsets (after or before the final norm) trained on a tiny model's own teacher-forced data beat
b = 0."""

import pytest
import torch

from helpers.method.calibration import acceptance_table, greedy_tree
from helpers.method.predictor import CodePredictor
from helpers.method.decoding import Decoder
from helpers.method.drafters import MedusaHeads, PositionOffsets, PreNormOffsets, ReusedHeads
from helpers.method.sampler import SamplerConfig, frame_uniforms, target_probs
from helpers.adapter.tiny import TinyTalkerSpec, build_tiny_talker, random_frame_inputs
from drafting import per_head_loss
from helpers.method.training import (TeacherForcedHidden, TrainConfig, held_out_loss, sampled_targets, soft_labels,
                                     sweep_choice, train_drafter)

SPEC = TinyTalkerSpec(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, vocab_size=64,
                      talker_hidden_size=64, logit_scale=10.0, position_ramp=0.5)


@pytest.fixture(scope="module")
def data():
    cp = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float32))
    gen = torch.Generator().manual_seed(0)
    n = 3300
    g, c0 = random_frame_inputs(SPEC.talker_hidden_size, SPEC.talker_vocab_size, n, gen, torch.float32)
    u = frame_uniforms(gen, batch=n)
    codes = torch.cat((c0[:, None], Decoder(cp, SamplerConfig()).decode_frame(g, c0, u).codes), dim=1)
    return cp, g, c0, u, codes, cp.teacher_forced_hidden(g, codes)


@pytest.mark.parametrize("kind", [PositionOffsets, PreNormOffsets])
def test_trained_offsets_lower_draft_loss_and_raise_tokens_per_step(data, kind):
    cp, g, c0, u, codes, h = data
    train, held = slice(0, 3000), slice(3000, 3300)
    reused, offsets = ReusedHeads(cp), kind(cp)
    x = cp.teacher_forced_hidden(g, codes, prenorm=True) if offsets.prenorm else h      # what the offsets read
    result = train_drafter(offsets, x[train], codes[train], TrainConfig(epochs=4, lr=1e-2), progress=False)
    assert len(result.loss_history) == 4 * 94
    with torch.no_grad():
        loss_reused, loss_offsets = reused.loss(h[held], codes[held]), offsets.loss(x[held], codes[held])
    assert loss_offsets < loss_reused - 1.0, (float(loss_offsets), float(loss_reused))
    calls = {}
    for name, drafter, states in (("reused", reused, h), ("offsets", offsets, x)):
        tree = greedy_tree(acceptance_table(drafter, states[train], codes[train], width=4), 16)
        decoder = Decoder(cp, SamplerConfig(), drafter, tree)
        calls[name] = sum(decoder.decode_frame(g[i:i + 1], c0[i:i + 1], u[i:i + 1]).calls
                          for i in range(held.start, held.stop))
    # the same frames and random stream for both (identical codes), so only the drafts differ
    assert calls["offsets"] < calls["reused"], calls


def test_prenorm_reads_the_residual_from_one_extraction(data):
    """r from the same teacher-forced pass: norm(r) = h; b = 0 drafts as the reused heads; a lazy extraction
    (`TeacherForcedHidden`) hands each drafter what it reads, so training on it equals training on r."""
    cp, g, _, _, codes, h = data
    r = cp.teacher_forced_hidden(g[:256], codes[:256], prenorm=True)
    assert (cp.final_norm(r) - h[:256]).abs().max() < 1e-6 and (r - h[:256]).abs().max() > 0.1
    assert torch.equal(PreNormOffsets(cp).draft_logits(r[:, 0], 1).argmax(-1),
                       ReusedHeads(cp).draft_logits(h[:256, 0], 1).argmax(-1))
    lazy = TeacherForcedHidden(cp, g[:256], codes[:256])
    assert lazy.for_drafter(PositionOffsets(cp)) is lazy and torch.equal(lazy.for_drafter(PreNormOffsets(cp))[:], r)
    start = torch.full((3, SPEC.hidden_size), 0.1)
    trained = [PreNormOffsets(cp, offsets=start) for _ in range(2)]
    train_drafter(trained[0], lazy, codes[:256], progress=False)
    train_drafter(trained[1], r, codes[:256], progress=False)
    assert torch.equal(trained[0].b, trained[1].b) and not torch.equal(trained[0].b, start)


def _perturbed_drafter(kind):
    """A float64 tiny code predictor and a `kind` drafter on it with trained-looking (non-zero) parameters."""
    cp = CodePredictor.from_talker(build_tiny_talker(SPEC, seed=0, dtype=torch.float64))
    drafter = kind(cp)
    with torch.no_grad():
        for p in drafter.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1), dtype=p.dtype))
    return cp, drafter


def _assert_same_value_and_gradient(drafter, loss, reference) -> torch.Tensor:
    """`loss()` equals `reference()` in value and in its gradient on every drafter parameter; returns the value."""
    out = []
    for f in (loss, reference):
        drafter.zero_grad()
        value = f()
        if list(drafter.parameters()):
            value.backward()
        out.append((value.detach(), [p.grad.clone() for p in drafter.parameters()]))
    assert torch.allclose(out[0][0], out[1][0], rtol=1e-12)
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(out[0][1], out[1][1], strict=True))
    return out[0][0]


@pytest.mark.parametrize("kind", [ReusedHeads, PositionOffsets, PreNormOffsets, MedusaHeads])
def test_batched_loss_is_the_per_head_loss_of_the_drafts(kind):
    """`Drafter.loss` (one product over every (t, j)) is the CE of what the drafter drafts (`draft_logits`, one
    (t, j) at a time), value and gradient, for every drafter, with trained-looking (non-zero) parameters."""
    cp, drafter = _perturbed_drafter(kind)
    gen = torch.Generator().manual_seed(2)
    h, codes = torch.randn(64, 15, 64, generator=gen, dtype=torch.float64), torch.randint(0, 64, (64, 16), generator=gen)
    _assert_same_value_and_gradient(drafter, lambda: drafter.loss(h, codes), lambda: per_head_loss(drafter, h, codes))


def test_sampled_targets_are_the_predictors_own_draws_and_teach_what_it_samples(data):
    """Self-distillation targets: c0 kept, c1..c15 the AR decoder's draws from each frame's (g, c0), whatever the
    batch (frame i takes row i of the generator's uniforms); Medusa heads trained on them agree with the predictor's
    draws more often than heads trained on codes that are noise to it (the miniature's deep codec levels)."""
    cp, g, c0, _, _, _ = data
    noise = torch.cat((c0[:, None], torch.randint(0, SPEC.vocab_size, (len(c0), 15),
                                                  generator=torch.Generator().manual_seed(5))), dim=1)
    drawn = sampled_targets(cp, g, noise, SamplerConfig(), torch.Generator().manual_seed(6), batch_size=256)
    u = frame_uniforms(torch.Generator().manual_seed(6), batch=len(c0))
    ar = Decoder(cp, SamplerConfig())
    assert torch.equal(drawn[:, 0], c0) and torch.equal(drawn[:40, 1:], ar.decode_frame(g[:40], c0[:40], u[:40]).codes)
    assert torch.equal(drawn[-7:, 1:], ar.decode_frame(g[-7:], c0[-7:], u[-7:]).codes)
    train, held = slice(0, 3000), slice(3000, 3300)
    held_draws = sampled_targets(cp, g[held], noise[held], SamplerConfig(), torch.Generator().manual_seed(7))
    top1 = {}
    for name, targets in (("noise", noise), ("samples", drawn)):
        h = cp.teacher_forced_hidden(g[train], targets[train])
        medusa = MedusaHeads(cp)
        train_drafter(medusa, h, targets[train], TrainConfig(epochs=2, lr=3e-3), progress=False)
        top1[name] = acceptance_table(medusa, cp.teacher_forced_hidden(g[held], held_draws), held_draws, width=1)[:, 0]
    assert (top1["samples"] > top1["noise"] + 0.05).all(), top1


@pytest.mark.parametrize("kind", [ReusedHeads, PositionOffsets, PreNormOffsets, MedusaHeads])
def test_soft_loss_is_the_cross_entropy_with_the_predictors_own_distributions(kind):
    """`Drafter.loss(probs=target_distribution(...))`: for every (t, j), the CE of the draft of c_{t+j} against
    p_{t+j}, the code predictor's sampling distribution on the same frame (its head on h_{t+j} = norm(r_{t+j}),
    temperature, top-k), computed here one (t, j) at a time from the predictor itself; value and gradient. The
    training's labels (`soft_labels`) are those distributions, computed once or a batch at a time."""
    cp, drafter = _perturbed_drafter(kind)
    gen = torch.Generator().manual_seed(2)
    g, c0 = random_frame_inputs(SPEC.talker_hidden_size, SPEC.talker_vocab_size, 48, gen, torch.float64)
    codes = torch.cat((c0[:, None], torch.randint(0, 64, (48, 15), generator=gen)), dim=1)
    x = cp.teacher_forced_hidden(g, codes, prenorm=drafter.prenorm)
    h = cp.final_norm(x) if drafter.prenorm else x
    sampler = SamplerConfig(top_k=20, temperature=0.7)          # top-k truncates: labels with zeros

    def reference():
        total = x.new_zeros(())
        for t in range(1, 15):
            for j in range(1, min(drafter.depth, 15 - t) + 1):
                p = target_probs(cp.logits(h[:, t + j - 1:t + j], [t + j])[:, 0], sampler)      # [B, V]
                draft = drafter.draft_logits(x[:, t - 1], t, j)[:, j - 1]
                total = total - (p * draft.log_softmax(-1)).sum()
        return total / x.shape[0]

    probs = drafter.target_distribution(x, sampler)
    lazy = soft_labels(drafter, TeacherForcedHidden(cp, g, codes, drafter.prenorm), sampler)
    assert torch.equal(soft_labels(drafter, x, sampler), probs) and torch.allclose(lazy[5:9], probs[5:9], rtol=1e-12)
    value = _assert_same_value_and_gradient(drafter, lambda: drafter.loss(x, codes, probs), reference)
    assert not torch.allclose(value, drafter.loss(x, codes).detach())   # not the codes' CE


def test_soft_labels_teach_the_predictors_draws_better_than_one_draw(data):
    """Medusa heads trained on the predictor's distributions (`TrainConfig.soft_labels`) along its draws guess its
    held-out draws at least as well as heads trained on the draws themselves, and their held-out CE against the
    draws is lower: one draw per frame is a noisy label, its distribution the exact one (the same frames, epochs and
    learning rate)."""
    cp, g, c0, _, codes, h = data
    train, held = slice(0, 600), slice(3000, 3300)
    held_draws = sampled_targets(cp, g[held], codes[held], SamplerConfig(), torch.Generator().manual_seed(7))
    held_h = cp.teacher_forced_hidden(g[held], held_draws)
    result = {}
    for name, soft in (("draws", None), ("distributions", SamplerConfig())):
        medusa = MedusaHeads(cp)
        train_drafter(medusa, h[train], codes[train], TrainConfig(epochs=3, lr=3e-3, soft_labels=soft), progress=False)
        result[name] = (held_out_loss(medusa, held_h, held_draws),
                        acceptance_table(medusa, held_h, held_draws, width=1)[:, 0].mean())
    assert result["distributions"][0] < result["draws"][0] - 1.0, result
    assert result["distributions"][1] >= result["draws"][1] - 0.01, result


def test_early_stopping_keeps_the_best_held_out_epoch(data):
    """With patience, training stops once the held-out loss stops falling and the kept weights are the best epoch's:
    their held-out loss is the lowest recorded, and recomputing it on the returned drafter gives that number."""
    cp, _, _, _, codes, h = data
    train, held = slice(0, 600), slice(3000, 3300)
    medusa = MedusaHeads(cp)
    cfg = TrainConfig(epochs=30, lr=3e-3, patience=2)
    result = train_drafter(medusa, h[train], codes[train], cfg, progress=False, val=(h[held], codes[held]))
    epochs = len(result.val_loss) - 1
    assert epochs < 30 and epochs - result.best_epoch == 2                # it stopped, two epochs after its best
    assert len(result.loss_history) == epochs * 19
    assert result.val_loss[result.best_epoch] == min(result.val_loss) < result.val_loss[0]
    assert held_out_loss(medusa, h[held], codes[held]) == pytest.approx(result.val_loss[result.best_epoch], rel=1e-6)
    fixed = train_drafter(MedusaHeads(cp), h[train], codes[train], TrainConfig(epochs=2, lr=3e-3), progress=False,
                          val=(h[held], codes[held]))
    assert fixed.best_epoch == 2 and len(fixed.val_loss) == 3             # no patience: every epoch, the last kept


def test_learning_rate_sweep_keeps_the_lowest_held_out_loss(data):
    """The sweep as the drafters stage runs it: a fresh drafter trained at each learning rate (early stopping), then
    `sweep_choice` keeps the one whose kept weights have the lowest held-out loss."""
    cp, _, _, _, codes, h = data
    train, held = slice(0, 600), slice(3000, 3300)
    runs = {}
    for lr in (1e-5, 1e-2):
        drafter = PositionOffsets(cp)
        runs[lr] = drafter, train_drafter(drafter, h[train], codes[train], TrainConfig(epochs=6, lr=lr, patience=1),
                                          progress=False, val=(h[held], codes[held]))
    sweep = sweep_choice({lr: result for lr, (_, result) in runs.items()})
    assert sweep.lr == 1e-2 and sweep.best_val[1e-2] < sweep.best_val[1e-5]        # 1e-5 hardly moves b
    assert sweep.result is runs[1e-2][1]
    assert held_out_loss(runs[sweep.lr][0], h[held], codes[held]) == pytest.approx(sweep.best_val[1e-2], rel=1e-6)
    with pytest.raises(ValueError, match="a sweep needs at least one training"):
        sweep_choice({})


def test_training_input_errors(data):
    cp, _, _, _, codes, h = data
    with pytest.raises(ValueError, match="has no trainable parameters"):
        train_drafter(ReusedHeads(cp), h, codes)
    with pytest.raises(ValueError, match=r"expected h \[B, 15, H\] and codes \[B, 16\]"):
        train_drafter(PositionOffsets(cp), h[:, :5], codes)
    with pytest.raises(ValueError, match="lr must be > 0"):
        TrainConfig(lr=0)
    with pytest.raises(ValueError, match="early stopping .* needs held-out data"):
        train_drafter(PositionOffsets(cp), h, codes, TrainConfig(patience=2))


def test_added_parameter_counts(data):
    cp = data[0]
    assert ReusedHeads(cp).added_params == 0
    assert PositionOffsets(cp).added_params == PreNormOffsets(cp).added_params == 3 * cp.hidden_size
    assert MedusaHeads(cp).added_params == 15 * 3 * cp.hidden_size * cp.vocab_size


def test_drafters_train_float32_masters_beside_a_bf16_code_predictor(data):
    """Adam at lr 1e-3 on bf16 offsets of size 1 loses every update (half a bf16 step there is 2^-8): the masters
    are float32, and training equals that of a float32 code predictor holding the same (bf16-valued) weights."""
    _, g, _, _, codes, _ = data
    talker = build_tiny_talker(SPEC, seed=0, dtype=torch.bfloat16)
    bf16, fp32 = CodePredictor.from_talker(talker), CodePredictor.from_talker(talker, dtype=torch.float32)
    assert fp32.official is not bf16.official and talker.code_predictor.lm_head[0].weight.dtype == torch.bfloat16
    h = bf16.teacher_forced_hidden(g[:640], codes[:640])                        # [640, 15, H] bf16
    cfg, start = TrainConfig(lr=1e-3, batch_size=32), torch.ones(3, SPEC.hidden_size)
    trained = {}
    for name, predictor, hidden in (("bf16", bf16, h), ("fp32", fp32, h.float())):
        d = PositionOffsets(predictor, 3, offsets=start)
        train_drafter(d, hidden, codes[:640], cfg, progress=False)
        trained[name] = d
    b = trained["bf16"].b
    assert b.dtype == torch.float32 and MedusaHeads(bf16, 3).heads.dtype == torch.float32
    assert torch.equal(b, trained["fp32"].b)                                     # the float32-master reference
    moved = (b - start).abs()
    assert moved.min() > 0 and moved.mean() > 0.25 * 20 * cfg.lr                # 20 Adam steps of about lr each
    assert trained["bf16"].draft_logits(h[:4, 0], 1).dtype == torch.bfloat16     # cast where used
