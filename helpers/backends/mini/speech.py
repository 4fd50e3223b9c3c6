"""Speech for the miniature: espeak-ng audio at 16 kHz and the frame-aligned phoneme stream.

The miniature's text is the phoneme sequence espeak-ng speaks, one symbol per 80 ms codec frame
(the phoneme sounding at the frame's centre, `_` for silence). espeak-ng is the miniature's text
front end and duration model; the talker learns the sound of each symbol in context. (The real model
reads BPE text and learns durations itself: a bigger job than a CPU-sized model can learn in minutes.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from helpers.artifacts import content_key, load_tensors, save_json, save_tensors

from helpers.backends.mini import espeak
from helpers.backends.mini.codec import HOP, SAMPLE_RATE, STACK

FRAME_SECONDS = HOP * STACK / SAMPLE_RATE          # 0.08
SILENCE = "_"


def speech_key(folder: Path) -> str:
    """The speech step's content (its audio and phoneme manifest, as `build._speech_step` writes them), hashed: the
    steps trained on it key on it, so a step shipped with the repository is taken only for the same speech."""
    folder = Path(folder)
    return content_key(folder / "audio.safetensors", folder / "manifest.json")


@dataclass
class Spoken:
    """One synthesized sentence: audio [N] float32 at 16 kHz and one phoneme symbol per codec frame."""

    lang: str
    text: str
    speaker: str
    audio: np.ndarray
    phonemes: list[str]


def num_frames(num_samples: int) -> int:
    """Codec frames for audio of num_samples at 16 kHz (matches codec.frame_features)."""
    return -(-(1 + num_samples // HOP) // STACK)


def frame_phonemes(events: list[tuple[int, str]], sample_rate: int, frames: int) -> list[str]:
    """The phoneme sounding at each frame's centre. events: [(start sample, phoneme)] sorted."""
    out, i, current = [], 0, SILENCE
    for f in range(frames):
        centre = (f + 0.5) * FRAME_SECONDS * sample_rate
        while i < len(events) and events[i][0] <= centre:
            current = events[i][1] or SILENCE
            i += 1
        out.append(current)
    return out


def speak(lang: str, text: str, speaker: str) -> Spoken:
    """Synthesize with a named speaker (espeak.SPEAKERS), resample to 16 kHz, align phonemes to frames."""
    from scipy.signal import resample_poly
    if speaker not in espeak.SPEAKERS:
        raise ValueError(f"unknown speaker {speaker!r}; allowed: {', '.join(espeak.SPEAKERS)}")
    s = espeak.SPEAKERS[speaker]
    audio, rate, events = espeak.synthesize_with_phonemes(text, lang, s.variant, s.rate, s.pitch)
    audio16 = resample_poly(audio, 320, 441).astype(np.float32) if rate == 22050 else None
    if audio16 is None:
        raise RuntimeError(f"espeak-ng returned {rate} Hz audio; the miniature expects 22050 Hz")
    return Spoken(lang, text, speaker, audio16, frame_phonemes(events, rate, num_frames(len(audio16))))


def speak_all(items: list[tuple[str, str, str]]) -> list[Spoken]:
    """Synthesize (lang, text, speaker) items in order, in a fresh Python process.

    libespeak-ng keeps wave-generator state between calls; the same sequence of calls in a fresh
    process gives identical audio, so a build is reproducible whatever ran before it in this process.
    """
    for lang, text, speaker in items:                          # fail here, with a clear message, not in the child
        espeak._check(text, lang)
        if speaker not in espeak.SPEAKERS:
            raise ValueError(f"unknown speaker {speaker!r}; allowed: {', '.join(espeak.SPEAKERS)}")
    with tempfile.TemporaryDirectory() as tmp:
        request, result = Path(tmp) / "items.json", Path(tmp) / "speech.safetensors"
        request.write_text(json.dumps(items))
        run = subprocess.run([sys.executable, "-m", "helpers.backends.mini.speech", str(request), str(result)],
                             capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError(f"speech synthesis failed:\n{run.stderr[-3000:]}")
        tensors = load_tensors(result)
        phonemes = json.loads((Path(tmp) / "speech.safetensors.json").read_text())
    offsets = tensors["offsets"].tolist()
    audio = tensors["audio"].numpy()
    return [Spoken(lang, text, speaker, audio[offsets[i]:offsets[i + 1]], phonemes[i])
            for i, (lang, text, speaker) in enumerate(items)]


def _main(request: str, result: str) -> None:
    spoken = [speak(*item) for item in json.loads(Path(request).read_text())]
    offsets = np.cumsum([0] + [len(s.audio) for s in spoken])
    save_tensors(result, {"audio": torch.from_numpy(np.concatenate([s.audio for s in spoken])),
                          "offsets": torch.from_numpy(offsets)})
    save_json(result + ".json", [s.phonemes for s in spoken])


if __name__ == "__main__":
    _main(*sys.argv[1:3])
