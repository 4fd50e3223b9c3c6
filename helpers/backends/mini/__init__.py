"""The `mini` backend: a miniature Qwen3-TTS the project builds offline (speech, codec, model)."""
