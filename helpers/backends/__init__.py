"""The backends: one model and its data and audio side behind one interface (`base.Backend`).

`base` (the interface: samples per role, teacher forcing, synthesis, decode, ASR), `languages` (the one
table of the languages: code, official name, espeak voice, FLEURS config, script, spaceless), `mini/` (the miniature Qwen3-TTS the project builds offline),
`qwen3/` (the real Qwen3-TTS-12Hz-0.6B-CustomVoice, the paper's datasets, Whisper).

Imports: `helpers.adapter`, `helpers.method`, `helpers.artifacts`. Backends take plain arguments (never the
experiment's `RunParams`), and `mini` and `qwen3` never import each other; the factory that picks one from
the run's parameters lives in `helpers.experiment.run.backend_factory`.
"""
