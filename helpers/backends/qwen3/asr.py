"""ASR for the `qwen3` backend: Whisper through `transformers` in a forced language, and its text normaliser.

    asr = WhisperASR("openai/whisper-large-v3-turbo", device="cuda", dtype=torch.float16)
    hyps = asr.transcribe([audio], rate=24000, lang="de")          # audio: mono float [n] at `rate`
    text.error_rate(refs, hyps, "de", whisper_normalizer(model_id))  # WER; CER for ja and zh

Error rates use Whisper's own normalisers (helpers.backends.text) with the checkpoint's English spelling map
(`normalizer.json`, Whisper's english.json, as WhisperTokenizer loads it).
"""

from __future__ import annotations

import numpy as np
import torch

from helpers.backends.text import TextNormalizer

ASR_RATE = 16000


def whisper_normalizer(model_id: str) -> TextNormalizer:
    """The text normaliser of a Whisper checkpoint (hub id or folder): its English spelling map, from the tokenizer."""
    from transformers import WhisperTokenizer

    spelling = WhisperTokenizer.from_pretrained(model_id).english_spelling_normalizer
    if not spelling:
        raise ValueError(f"{model_id!r} ships no English spelling map (normalizer.json, Whisper's english.json), which "
                         "Whisper's English normaliser needs; use a Whisper checkpoint that has it, such as "
                         "openai/whisper-large-v3-turbo")
    return TextNormalizer(spelling)


class WhisperASR:
    """A Whisper checkpoint (hub id or local folder) and its processor, in eval mode."""

    def __init__(self, model_id: str, device: str = "cpu", dtype: torch.dtype = torch.float32, batch_size: int = 8):
        from transformers import WhisperForConditionalGeneration, WhisperProcessor

        self.processor = WhisperProcessor.from_pretrained(model_id)
        self.model = WhisperForConditionalGeneration.from_pretrained(model_id, dtype=dtype).to(device).eval()
        self.batch_size = batch_size
        self.languages = {k[2:-2] for k in getattr(self.model.generation_config, "lang_to_id", {})}

    @torch.no_grad()
    def transcribe(self, audio: list[np.ndarray], rate: int, lang: str) -> list[str]:
        """Transcripts of mono float audio at `rate`, decoded in language `lang` (Whisper's code: en, de, ...)."""
        import librosa

        if lang not in self.languages:
            raise ValueError(f"this Whisper has no language {lang!r}; it has {', '.join(sorted(self.languages))}")
        out = []
        for start in range(0, len(audio), self.batch_size):
            batch = [librosa.resample(np.asarray(a, dtype=np.float32), orig_sr=rate, target_sr=ASR_RATE)
                     for a in audio[start:start + self.batch_size]]
            inputs = self.processor(batch, sampling_rate=ASR_RATE, return_tensors="pt", truncation=False,
                                    padding="longest", return_attention_mask=True)
            if inputs.input_features.shape[-1] < 3000:      # short form: Whisper's fixed 30 s window
                inputs = self.processor(batch, sampling_rate=ASR_RATE, return_tensors="pt", return_attention_mask=True)
            inputs = inputs.to(self.model.device)
            ids = self.model.generate(inputs.input_features.to(self.model.dtype), attention_mask=inputs.attention_mask,
                                      language=lang, task="transcribe")
            out += [t.strip() for t in self.processor.batch_decode(ids, skip_special_tokens=True)]
        return out
