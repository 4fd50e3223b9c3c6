"""Run parameters: one schema for the YAML files, the runner and every notebook's `parameters` cell.

    P = load_params("params/mini.yaml", overrides={"seed": 1})     # validated RunParams
    P = RunParams.from_dict(dict(run_name="x", ...))                 # same checks

An unknown name, a wrong type or a value outside what is allowed fails at once, naming the key, the
value and what is allowed. The defaults are the `mini` run, so a notebook opened in JupyterLab runs
as is.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import yaml

from helpers.backends.languages import CODES as LANGUAGE_CODES
from helpers.method.checks import positive_int
from helpers.method.compiler import COMPILE_MODES
from helpers.method.drafters import DRAFTER_KINDS

REPO_ROOT = Path(__file__).resolve().parents[3]
CHOICES = {
    "backend": ("mini", "qwen3"),
    "mini_preset": ("mini", "smoke"),
    "device": ("cpu", "cuda", "auto"),
    "dtype": ("float64", "float32", "bfloat16", "float16"),
    "attn_implementation": ("eager", "sdpa", "flash_attention_2"),
    "inner_loop_dtype": ("same", "float64", "float32", "bfloat16"),
    "compile": COMPILE_MODES,
    "cuda_graph": ("auto", "on", "off"),
    "drafter_targets": ("codec", "samples", "distributions"),
}
ITEM_CHOICES = {"languages": LANGUAGE_CODES, "drafters": DRAFTER_KINDS}
POSITIVE = {"train_samples", "validation_samples", "calibration_samples", "eval_samples_per_language", "depth",
            "drafter_epochs", "drafter_batch_size", "acceptance_width", "tree_size", "ceiling_frames", "top_k",
            "wer_seeds", "num_shards", "latency_calls", "latency_frames", "asr_batch_size", "extraction_batch_size"}
NON_EMPTY = ("model_id_or_path", "voxpopuli_id", "voxpopuli_config", "voxpopuli_split", "librispeech_id",
             "librispeech_config", "librispeech_split", "fleurs_id", "fleurs_split", "whisper_id")


class ParamsError(ValueError):
    """A parameter file or value that cannot be used; the message says what is allowed."""


@dataclass
class RunParams:
    """Everything a run depends on. Defaults: the `mini` run (params/mini.yaml)."""

    run_name: str = "mini"
    output_dir: str = "outputs"
    cache_dir: str = "outputs/cache"        # built models shared across runs (the miniature's build)
    backend: str = "mini"
    # backend "mini": which miniature (helpers.backends.mini.build presets: model, codec and training sizes)
    mini_preset: str = "mini"
    # the miniature's build seed (its sentences, voices, codec and training). `seed` is the run's sampling and data
    # order seed: varying it reuses the cached miniature; varying this one builds another miniature (minutes)
    mini_build_seed: int = 0
    # the trained miniature committed with the repository (`make mini` writes it): a build step whose key (every
    # parameter and the speech's content) is there is copied, not trained. "" builds every step from scratch
    mini_trained: str = "outputs/mini-trained"
    # backend "qwen3": the official checkpoint, by hub id or local folder
    model_id_or_path: str = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
    device: str = "cpu"
    dtype: str = "float64"
    attn_implementation: str = "eager"
    # the inner loop (code predictor and drafters) runs in its own dtype beside the talker's `dtype`: "same" (= dtype),
    # "float64" (AR and speculative codes identical, frame for frame, checked), or "float32" / "bfloat16" (deployment:
    # tree and sequential calls round differently, so codes agree on most frames, not all; the run reports the
    # identical fraction and a per-position parity test of the code distributions instead)
    inner_loop_dtype: str = "same"
    seed: int = 0
    # data: utterances per role (train/validation: drafter training; calibration: trees; evaluation per language)
    languages: list[str] = field(default_factory=lambda: list(LANGUAGE_CODES))
    train_samples: int = 300
    validation_samples: int = 50
    calibration_samples: int = 30
    eval_samples_per_language: int = 10
    # drafters and trees
    depth: int = 3
    drafters: list[str] = field(default_factory=lambda: list(DRAFTER_KINDS))
    drafter_epochs: int = 10                # passes; with drafter_patience > 0 the most passes
    drafter_lr: float = 1e-3
    drafter_batch_size: int = 32
    drafter_patience: int = 2               # 0: fixed epochs (the paper: 1); n: early stopping on validation after n
                                            # epochs without a lower held-out loss (the best epoch's weights kept)
    drafter_lr_sweep: list[float] = field(default_factory=lambda: [1e-3, 3e-3])   # learning rates tried (the
                                            # lowest held-out loss kept); empty: drafter_lr alone
    # what the drafters learn to draft: "codec", the codec's codes of the training audio (the paper's setting);
    # "samples", the code predictor's own draws of c1..c15 (the run's sampler) from the same frames' (g, c0); or
    # "distributions", on the frames of those draws, the predictor's sampling distribution at each position (soft
    # labels): Medusa-2's self-distillation, for a predictor far from its data (the miniature's; docs/miniature.md)
    drafter_targets: str = "distributions"
    acceptance_width: int = 8
    tree_sizes: list[int] = field(default_factory=lambda: [4, 8, 15, 16, 31, 32, 47, 63, 64])   # + N + 1 = 16, 32, 48, 64
    tree_size: int = 32
    ceiling_frames: int = 24                # calibration frames for the ideal drafter's ceiling (exact marginals)
    # sampling of c0 (talker) and c1..c15 (code predictor): the deployed settings
    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 0.9
    # WER parity
    wer_seeds: int = 3
    audio_examples: int = 2
    # scale-out (backend qwen3): this process's shard of extraction and evaluation
    shard_index: int = 0
    num_shards: int = 1
    # CPU processes for a stage's independent jobs (syntheses, replays, quality runs: `helpers.experiment.run.pool`):
    # 0 = one per available core on a CPU run, one on CUDA. The results do not depend on it (a test checks)
    workers: int = 0
    # backend "qwen3": voice, data and ASR. A dataset id is a hub id or a local folder in the hub layout (parquet
    # files and a README listing the configs) or made by `save_to_disk` (<id>/<config>); FLEURS configs per language
    # are fixed (the `fleurs` column of helpers.backends.languages). Utterances longer than max_utterance_seconds are
    # skipped.
    # *_revision / *_data_dir: a hub branch and a folder in it ("{config}" is replaced by the config name; with a
    # folder no config name is passed). facebook/voxpopuli and google/fleurs are loading scripts, which datasets 4
    # refuses: they are read from the hub's parquet conversion (refs/convert/parquet, <config>/<split>/*.parquet).
    # openslr/librispeech_asr is parquet on its main branch. FLEURS: its train split, as the paper evaluates.
    # speaker: the CustomVoice speaker of every utterance ("" for none); whisper_id: any Whisper checkpoint.
    speaker: str = "ryan"
    voxpopuli_id: str = "facebook/voxpopuli"
    voxpopuli_config: str = "en"
    voxpopuli_split: str = "train"
    voxpopuli_revision: str = "refs/convert/parquet"
    voxpopuli_data_dir: str = "{config}"
    librispeech_id: str = "openslr/librispeech_asr"
    librispeech_config: str = "clean"
    librispeech_split: str = "test"
    librispeech_revision: str = ""
    librispeech_data_dir: str = ""
    fleurs_id: str = "google/fleurs"
    fleurs_split: str = "train"
    fleurs_revision: str = "refs/convert/parquet"
    fleurs_data_dir: str = "{config}"
    streaming: bool = True
    max_utterance_seconds: float = 20.0
    whisper_id: str = "openai/whisper-large-v3-turbo"
    asr_batch_size: int = 8
    extraction_batch_size: int = 16
    # latency and Core ML
    latency_tree_sizes: list[int] = field(default_factory=lambda: [4, 8, 15, 16, 31, 32, 47, 63, 64])
    latency_calls: int = 200
    latency_warmup: int = 20
    latency_frames: int = 200               # whole frames timed AR vs speculative (recorded evaluation frames)
    # whole frames of the miniature embedded at the real code predictor's size (helpers.adapter.full_size), every CPU
    # deployment, in notebook 06 (mini backend, CPU; 0 skips them): frames timed per pass (`timing_passes`), and
    # frames on which the headline's speculative loop is counted against its AR loop (untimed)
    full_size_frames: int = 8
    full_size_identity_frames: int = 100
    timing_passes: int = 3                  # interleaved passes over the same frames of the deployments' whole frames
                                            # (the miniature's and the full size's): a headline's median and range
    coreml_tree_size: int = 16
    # compiled calls beside the eager ones in notebook 06 (helpers.method.decoding, helpers.method.compiler): none (skip: compiling costs
    # about a minute per decoder on a CPU), inductor (torch.compile, CPU or CUDA), cuda_graph and inductor_graph (CUDA
    # graphs of the eager or of inductor's kernels; CUDA only)
    compile: str = "none"
    compile_tree_sizes: list[int] = field(default_factory=lambda: [4, 8, 16])
    # CUDA-graph capture in notebook 06's latency measurements: auto (on where the timed model is on CUDA, off
    # elsewhere), on (CUDA only: refused on a CPU), off. On: the per-call sweep replays captured graphs, and with
    # compile none the compiled section runs the captured (cuda_graph) decoders beside the eager ones
    cuda_graph: str = "auto"

    def __post_init__(self):
        for f in fields(self):
            _check_type(f.name, getattr(self, f.name), f.type)
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ParamsError(f"{name}={getattr(self, name)!r} is not allowed; allowed: {', '.join(allowed)}")
        for name, allowed in ITEM_CHOICES.items():
            values = getattr(self, name)
            bad = [v for v in values if v not in allowed]
            if bad or not values or len(set(values)) != len(values):
                raise ParamsError(f"{name}={values!r}: give a non-empty list without repeats from {', '.join(allowed)}")
        for name in POSITIVE:
            positive_int(name, getattr(self, name), ParamsError)
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", self.run_name):
            raise ParamsError(f"run_name={self.run_name!r}: use letters, digits, '.', '_' or '-' (it names a folder)")
        for name in ("tree_sizes", "latency_tree_sizes", "compile_tree_sizes"):
            if not getattr(self, name) or any(not 1 <= n <= 64 for n in getattr(self, name)):
                raise ParamsError(f"{name}={getattr(self, name)!r} must be a non-empty list of sizes in 1..64")
        if self.cuda_graph == "on" and self.device == "cpu":
            raise ParamsError("cuda_graph='on' needs device cuda (or auto on a CUDA machine); "
                              "on a CPU use cuda_graph='auto' or 'off'")
        if self.compile in ("cuda_graph", "inductor_graph") and self.device == "cpu":
            raise ParamsError(f"compile={self.compile!r} needs device cuda (or auto on a CUDA machine); "
                              "on a CPU use compile='inductor' or 'none'")
        if self.full_size_frames < 0:
            raise ParamsError(f"full_size_frames={self.full_size_frames} must be >= 0 (0: skip the full-size frames)")
        if self.timing_passes < 1 or self.full_size_identity_frames < 0:
            raise ParamsError(f"timing_passes={self.timing_passes} must be >= 1 and full_size_identity_frames="
                              f"{self.full_size_identity_frames} >= 0")
        if not 1 <= self.coreml_tree_size <= 64:
            raise ParamsError(f"coreml_tree_size={self.coreml_tree_size} must be in 1..64")
        if self.tree_size not in self.tree_sizes:
            raise ParamsError(f"tree_size={self.tree_size} must be one of tree_sizes={self.tree_sizes}")
        if self.depth > 14:
            raise ParamsError(f"depth={self.depth} must be in 1..14 (15 codes per frame)")
        if self.drafter_patience < 0 or any(not float(lr) > 0 for lr in self.drafter_lr_sweep):
            raise ParamsError(f"drafter_patience must be >= 0 (got {self.drafter_patience}) and every learning rate of "
                              f"drafter_lr_sweep > 0 (got {self.drafter_lr_sweep})")
        if not 0.0 < self.top_p <= 1.0 or not self.temperature > 0 or not self.drafter_lr > 0:
            raise ParamsError(f"top_p must be in (0, 1] (got {self.top_p}), temperature > 0 (got {self.temperature}), "
                              f"drafter_lr > 0 (got {self.drafter_lr})")
        empty = [name for name in NON_EMPTY if not getattr(self, name).strip()]
        if empty:
            raise ParamsError(f"{', '.join(empty)}: give a hub id or a local folder, not an empty string")
        for name in ("voxpopuli_data_dir", "librispeech_data_dir", "fleurs_data_dir"):
            rest = getattr(self, name).replace("{config}", "")
            if "{" in rest or "}" in rest:
                raise ParamsError(f"{name}={getattr(self, name)!r}: a folder, where only '{{config}}' may be replaced")
        if not self.max_utterance_seconds > 0:
            raise ParamsError(f"max_utterance_seconds={self.max_utterance_seconds} must be > 0")
        if self.workers < 0:
            raise ParamsError(f"workers={self.workers} must be >= 0 (0: one per available CPU core, one on CUDA)")
        if self.workers > 1 and self.device == "cuda":
            raise ParamsError(f"workers={self.workers} starts CPU processes, the run is on CUDA: use workers 0 or 1 "
                              "there (and num_shards to spread a run over GPUs)")
        if not 0 <= self.shard_index < self.num_shards:
            raise ParamsError(f"shard_index={self.shard_index} must be in 0..num_shards-1 (num_shards={self.num_shards})")

    @classmethod
    def from_dict(cls, values: dict) -> "RunParams":
        if not isinstance(values, dict):
            raise ParamsError(f"parameters must be a mapping of name: value, got {type(values).__name__}")
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(allowed))
        if unknown:
            raise ParamsError(f"unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def inner_dtype(self) -> str:
        """The inner loop's dtype: `inner_loop_dtype`, or `dtype` where that is "same"."""
        return self.dtype if self.inner_loop_dtype == "same" else self.inner_loop_dtype

    @property
    def exact(self) -> bool:
        """Whether AR and speculative codes must be identical (a float64 inner loop) or agree in distribution."""
        return self.inner_dtype == "float64"

    def graphs_on(self, device_type: str) -> bool:
        """Whether the latency measurements capture CUDA graphs for a model on `device_type` ("cpu", "cuda")."""
        if self.cuda_graph == "on" and device_type != "cuda":
            raise ParamsError(f"cuda_graph='on' needs the timed model on CUDA, it is on {device_type!r} "
                              f"(device={self.device!r}); use cuda_graph='auto' or 'off'")
        return self.cuda_graph == "on" or (self.cuda_graph == "auto" and device_type == "cuda")

    def compiled_mode(self, device_type: str) -> str:
        """The compiled section's mode in notebook 06: `compile` where set, else cuda_graph where graphs are on."""
        return self.compile if self.compile != "none" else ("cuda_graph" if self.graphs_on(device_type) else "none")

    @property
    def run_dir(self) -> Path:
        """outputs/<run name>/: executed notebooks, artifacts, figures, tables, metrics.json, report.md."""
        return Path(self.output_dir) / self.run_name


def _check_type(name: str, value, annotation: str) -> None:
    kinds = {"str": str, "int": int, "float": (int, float), "bool": bool}
    if annotation.startswith("list["):
        inner = kinds[annotation[5:-1]]
        ok = isinstance(value, list) and all(isinstance(v, inner) and not isinstance(v, bool) for v in value)
    else:
        kind = kinds[annotation]
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if not ok:
        raise ParamsError(f"{name}={value!r} has type {type(value).__name__}; expected {annotation}")


def load_params(path: str | Path | None = None, overrides: dict | None = None) -> RunParams:
    """Validated parameters from a YAML file (or the defaults) with `overrides` on top."""
    values: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            available = sorted(p.name for p in Path("params").glob("*.yaml")) if Path("params").is_dir() else []
            raise ParamsError(f"params file {str(path)!r} does not exist; available in params/: {', '.join(available)}")
        values = yaml.safe_load(path.read_text()) or {}
        if not isinstance(values, dict):
            raise ParamsError(f"{path}: expected a mapping of name: value at the top level")
    return RunParams.from_dict({**values, **(overrides or {})})


def notebook_params(namespace: dict) -> RunParams:
    """A notebook's parameters: `params_file` plus every RunParams name set (not None) in the namespace.

    Works the same in JupyterLab (the parameters cell's defaults) and under papermill (`-p name value`
    injected after it). Moves the working directory to the repository root, where relative paths
    (params/, outputs/) point, whichever folder the notebook was started from.
    """
    os.chdir(REPO_ROOT)
    names = {f.name for f in fields(RunParams)}
    overrides = {k: v for k, v in namespace.items() if k in names and v is not None}
    return load_params(namespace.get("params_file"), overrides)


def parse_override(text: str) -> tuple[str, object]:
    """'key=value' (value parsed as YAML: 3, 0.5, true, [16, 32], text) -> (key, value)."""
    if "=" not in text:
        raise ParamsError(f"override {text!r} must look like key=value")
    key, raw = text.split("=", 1)
    return key.strip(), yaml.safe_load(raw)
