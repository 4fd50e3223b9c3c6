"""The `qwen3` backend: the real Qwen3-TTS-12Hz-0.6B-CustomVoice, VoxPopuli / LibriSpeech / FLEURS, Whisper."""
