"""Notebook 01's figure: the miniature's training, train and held-out cross-entropy per step, both phases."""

from __future__ import annotations

import numpy as np

from helpers.report.plots import plt, running_mean          # pyplot with the figures' headless backend and theme
from helpers.report.trend import trend_words

WINDOW = 20                                                  # steps per running mean of the train curves


def mini_training_curves(history: dict):
    """history: `Mini.history["training"]` (helpers.backends.mini.train.MiniTrainResult as a dict). Left: talker CE
    per frame (joint phase); right: code-predictor CE per position through the joint phase and the code-predictor
    phase (its steps continue the x axis), the kept step marked. Train lines are 20-step running means, each plotted
    at its window's last step, every step faint behind it."""
    val = history.get("validation") or []
    joint = [v for v in val if v["phase"] == "joint"]
    phase2 = [v for v in val if v["phase"] == "predictor"]
    n1 = len(history["talker_loss"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    train_label = f"train (running mean over {WINDOW} steps)"
    for ax, train, key, title in ((left, history["talker_loss"], "talker", "talker (c0)"),
                                  (right, history["predictor_loss"], "predictor", "code predictor (c1..c15)")):
        steps, mean = running_mean(train, WINDOW)
        ax.plot(np.arange(len(train)), train, color="C0", lw=0.5, alpha=0.2)
        ax.plot(steps - 1, mean, color="C0", label=f"{train_label}, joint phase")
        ax.plot([v["step"] for v in joint], [v[key] for v in joint], "o-", color="C1", label="held out, joint phase")
        ax.set(xlabel="training step (batch)", ylabel="cross-entropy (nats per code)", title=title)
    if phase2:
        loss = history["predictor_phase_loss"]
        steps, mean = running_mean(loss, WINDOW)
        right.plot(n1 + np.arange(len(loss)), loss, color="C2", lw=0.5, alpha=0.2)
        right.plot(n1 + steps - 1, mean, color="C2", label=f"{train_label}, code-predictor phase")
        right.plot([n1 + v["step"] for v in phase2], [v["predictor"] for v in phase2], "s-", color="C3",
                   label="held out, code-predictor phase")
        right.axvline(n1 + history["predictor_best_step"], color="k", ls=":", label="weights kept")
    handles, labels = right.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8, frameon=False,
               title="faint: every training step", title_fontsize=8)
    return fig


def held_out_words(training: dict) -> str | None:
    """Notebook 01's sentence on the held-out curves of `training` (`Mini.history["training"]`: "validation",
    [{"step", "phase" ("joint" or "predictor"), "predictor", "talker"}], "talker_loss", "predictor_phase_loss",
    "predictor_best_step"), every turn included (`trend_words`); None where no held-out curve was recorded."""
    val = training.get("validation") or []
    if not val:
        return None
    joint = [v for v in val if v["phase"] == "joint"]
    phase2 = [v for v in val if v["phase"] == "predictor"]

    def said(points, key):
        return trend_words([v["step"] for v in points], [v[key] for v in points])

    text = (f"Held-out code-predictor CE (nats) over the joint phase ({len(training['talker_loss'])} steps): "
            f"{said(joint, 'predictor')}")
    if phase2:
        kept = min(phase2, key=lambda v: v["predictor"])
        text += (f"; over the code-predictor phase ({len(training['predictor_phase_loss'])} steps, counted from its "
                 f"start): {said(phase2, 'predictor')}; the weights kept are step {training['predictor_best_step']}'s "
                 f"({kept['predictor']:.3f})")
    return text + f". Held-out talker CE over the joint phase: {said(joint, 'talker')}."
