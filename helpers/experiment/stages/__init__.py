"""The cached stages the notebooks call: `stages` (data -> drafters -> calibration -> evaluation -> quality; a
notebook runs one and shows it), what a stage's artifacts depend on (`stage_cache`), the data stage (`data_stage`),
the ideal drafter's jobs (`ideal`), the quality stage (`quality`), the codec's round trip level by level
(`codec_round_trip`), the positional mismatch on a controlled model (`drift`) and the scale-out of extraction over
processes or GPUs (`shards`). Notebooks import the chain as `from helpers.experiment.stages import stages`.
"""
