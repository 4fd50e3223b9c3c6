"""The adapter to the official `qwen_tts` classes: how our decoders sit inside the real model.

`talker_inputs` (the talker's prompt and teacher forcing, as the official fine-tuning recipe builds them),
`inner_loop` (the drop-in switch that replaces `code_predictor.generate` by our decoder), `synthesis`
(free-running synthesis through the official `generate`), `tiny` (tiny random official talkers for tests and
teaching), `global_rng` (the global RNG seeded for one block and restored: the official classes' own draws).

Imports: `helpers.method` (and `helpers.artifacts`); never a backend, a measurement or the experiment.
"""
