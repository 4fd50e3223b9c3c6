"""Notebook 01's figure: the miniature's training, train and held-out cross-entropy per step, both phases."""

from __future__ import annotations

import numpy as np

from helpers.report.plots import plt          # pyplot with the figures' headless backend and theme


def _smooth(x: list[float], window: int = 20) -> np.ndarray:
    x = np.asarray(x, float)
    return np.convolve(x, np.ones(window) / window, mode="valid") if len(x) >= window else x


def mini_training_curves(history: dict):
    """history: `Mini.history["training"]` (helpers.backends.mini.train.MiniTrainResult as a dict). Left: talker CE
    per frame (joint phase); right: code-predictor CE per position through the joint phase and the code-predictor
    phase (its steps continue the x axis), the kept step marked. Train lines are 20-step running means."""
    val = history.get("validation") or []
    joint = [v for v in val if v["phase"] == "joint"]
    phase2 = [v for v in val if v["phase"] == "predictor"]
    n1 = len(history["talker_loss"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    for ax, train, key, title in ((left, history["talker_loss"], "talker", "talker (c0)"),
                                  (right, history["predictor_loss"], "predictor", "code predictor (c1..c15)")):
        s = _smooth(train)
        ax.plot(np.arange(len(s)) + (len(train) - len(s)), s, color="C0", alpha=0.6, label="train, joint phase")
        ax.plot([v["step"] for v in joint], [v[key] for v in joint], "o-", color="C1", label="held out, joint phase")
        ax.set(xlabel="training step", ylabel="cross-entropy (nats)", title=title)
    if phase2:
        s = _smooth(history["predictor_phase_loss"])
        right.plot(n1 + np.arange(len(s)) + (len(history["predictor_phase_loss"]) - len(s)), s, color="C2", alpha=0.6,
                   label="train, code-predictor phase")
        right.plot([n1 + v["step"] for v in phase2], [v["predictor"] for v in phase2], "s-", color="C3",
                   label="held out, code-predictor phase")
        right.axvline(n1 + history["predictor_best_step"], color="k", ls=":", label="weights kept")
    for ax in (left, right):
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
