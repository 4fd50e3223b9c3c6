"""How much decoding a run's parameters ask for: free-running syntheses and inner-loop replays, in utterances and
frames, counted from the parameters the way the stages spend them (`helpers.experiment.stages.stages`,
`helpers.experiment.stages.quality`).

Frames per utterance are the datasets' means in the paper's Table 1 (frames / samples): FLEURS for the evaluation
and quality stages, LibriSpeech test-clean for calibration. Synthesised speech is about as long as the text's
recording, so these are the frames a run decodes, to the accuracy of that assumption.

`run_work(P)` -> {"stages": {stage: {"ar", "spec" (utterances), "frames_per_utterance", "what"}}, "ar_frames",
"spec_frames" (free-running synthesis), "replay_frames" (the inner loop alone), "teacher_forced_frames"}.
"""

from __future__ import annotations

from helpers.experiment.run.params import RunParams
from helpers.report.paper import PAPER


def table1_frames_per_utterance(stage: str) -> float:
    """Mean frames per utterance of the paper's Table 1 rows of `stage` (training, validation, calibration,
    evaluation): their frames summed over their samples summed."""
    rows = [r for r in PAPER["table1_datasets"] if r[0] == stage]
    if not rows:
        raise ValueError(f"stage {stage!r} is not in the paper's Table 1; it has "
                         f"{sorted({r[0] for r in PAPER['table1_datasets']})}")
    return sum(float(r[5]) for r in rows) / sum(r[3] for r in rows)


def replay_configs(P: RunParams) -> int:
    """Drafter x N configurations the evaluation stage replays: the main drafter at every tree size, the others at
    tree_size (`stages.evaluation`)."""
    return len(P.tree_sizes) + len(P.drafters) - 1


def run_work(P: RunParams) -> dict:
    """The syntheses and replays of a run (see the module docstring)."""
    evaluated = P.eval_samples_per_language * len(P.languages)
    fleurs, librispeech = table1_frames_per_utterance("evaluation"), table1_frames_per_utterance("calibration")
    voxpopuli = table1_frames_per_utterance("training")
    exact = P.inner_loop_dtype == "float64"
    replays = len(P.languages) * replay_configs(P) if exact else evaluated * replay_configs(P)
    stages = {
        "calibration": (P.calibration_samples, 0, librispeech, "AR synthesis of the calibration utterances"),
        "evaluation": (evaluated, evaluated, fleurs, "AR and speculative synthesis of every evaluation utterance"),
        "quality": ((P.wer_seeds - 1) * evaluated, P.wer_seeds * evaluated, fleurs,
                    f"AR and speculative over {P.wer_seeds} seeds (AR's first seed is the evaluation stage's)"),
        "replay": (0, replays, fleurs, "the inner loop alone, every drafter and N: " + (
            "the first run of each language decoded (the rest walked)" if exact else "every evaluation run decoded")),
    }
    out = {name: {"ar": a, "spec": s, "frames_per_utterance": f, "what": what}
           for name, (a, s, f, what) in stages.items()}
    synthesis = [v for k, v in out.items() if k != "replay"]
    return {"stages": out, "ar_frames": sum(v["ar"] * v["frames_per_utterance"] for v in synthesis),
            "spec_frames": sum(v["spec"] * v["frames_per_utterance"] for v in synthesis),
            "replay_frames": replays * fleurs,
            "teacher_forced_frames": (P.train_samples + P.validation_samples) * voxpopuli}
