"""Offline speech synthesis with the libespeak-ng that the ``espeakng-loader`` wheel ships.

The library is driven through ctypes in synchronous mode: audio arrives in a Python
callback, together with word/phoneme events. libespeak-ng keeps global state (one voice,
one set of parameters, one callback, one random generator), so it is initialised once per
process and every call is serialised by a lock; each call sets voice, rate, pitch and the
random seed again, so no setting leaks from one call into the next. Determinism: the same
sequence of calls in a fresh process gives identical samples, but repeating one call inside
a process can differ slightly (a few samples of length, small waveform changes), because the
wave generator keeps pitch-jitter/phase state across calls that no API call resets.
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path
from dataclasses import dataclass

import numpy as np

from helpers.backends.languages import language

MAX_CHARS = 300
DEFAULT_RATE = 175  # words per minute, espeak-ng's default
DEFAULT_PITCH = 50  # 0..100, espeak-ng's default


@dataclass(frozen=True)
class Speaker:
    """A named voice: an espeak-ng variant plus rate (wpm) and pitch (0..100)."""

    name: str
    variant: str | None
    rate: int = DEFAULT_RATE
    pitch: int = DEFAULT_PITCH


SPEAKERS = {
    s.name: s
    for s in (
        Speaker("default", None),
        Speaker("m3", "m3", 165, 45),
        Speaker("f2", "f2", 170, 60),
        Speaker("klatt4", "klatt4", 160, 50),
        Speaker("f5", "f5", 180, 65),
        Speaker("m7", "m7", 150, 40),
    )
}

# espeak_lib.h constants
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INIT_PHONEME_EVENTS = 0x0001
_INIT_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_ENDPAUSE = 0x1000
_PARAM_RATE, _PARAM_PITCH = 1, 3
_EV_LIST_TERMINATED, _EV_WORD, _EV_PHONEME = 0, 1, 7
_EV_SAMPLERATE = 8


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),  # milliseconds from the start of the call
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


class _Engine:
    """Process-wide handle on libespeak-ng (create through :func:`_engine`)."""

    def __init__(self) -> None:
        import espeakng_loader

        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_CALLBACK]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
            ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p,
        ]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_Synchronize.restype = ctypes.c_int
        lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        lib.espeak_ng_SetRandSeed.restype = None
        data = espeakng_loader.get_data_path().encode()
        sr = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data, _INIT_PHONEME_EVENTS | _INIT_DONT_EXIT)
        if sr <= 0:
            raise RuntimeError(f"espeak_Initialize failed ({sr}) with data path {data.decode()}")
        self.lib, self.sample_rate = lib, sr
        self.variants = {p.name for p in (Path(data.decode()) / "voices" / "!v").iterdir()}
        self.lock = threading.Lock()
        self._chunks: list[np.ndarray] = []
        self._events: list[tuple[int, int, str]] = []
        self._callback = _CALLBACK(self._on_audio)  # keep a reference: C holds the pointer
        lib.espeak_SetSynthCallback(self._callback)

    def _on_audio(self, wav, n, events) -> int:
        if n > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        i = 0
        while events[i].type != _EV_LIST_TERMINATED:
            ev = events[i]
            if ev.type == _EV_PHONEME:
                self._events.append((_EV_PHONEME, ev.sample, ev.id.string.decode("utf-8", "replace")))
            elif ev.type == _EV_WORD:
                self._events.append((_EV_WORD, ev.sample, str(ev.text_position)))
            i += 1
        return 0

    def run(self, text: str, voice: str, rate: int, pitch: int):
        with self.lock:
            if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise ValueError(f"espeak-ng has no voice {voice!r}")
            self.lib.espeak_SetParameter(_PARAM_RATE, int(rate), 0)
            self.lib.espeak_SetParameter(_PARAM_PITCH, int(pitch), 0)
            self.lib.espeak_ng_SetRandSeed(0)  # noise source; wavegen phase state still carries over
            self._chunks, self._events = [], []
            buf = text.encode("utf-8") + b"\0"
            err = self.lib.espeak_Synth(buf, len(buf), 0, _POS_CHARACTER, 0, _CHARS_UTF8 | _ENDPAUSE, None, None)
            self.lib.espeak_Synchronize()
            if err != 0:
                raise RuntimeError(f"espeak_Synth failed with code {err}")
            chunks, events = self._chunks, self._events
            self._chunks, self._events = [], []
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.int16)
        return audio, events


_ENGINE: _Engine | None = None
_ENGINE_LOCK = threading.Lock()


def _engine() -> _Engine:
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = _Engine()
        return _ENGINE


def _check(text: str, lang: str) -> None:
    language(lang)
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text is empty")
    if len(text) > MAX_CHARS:
        raise ValueError(f"text has {len(text)} characters; the limit is {MAX_CHARS}")


def _voice_name(lang: str, voice_variant: str | None) -> str:
    base = language(lang).espeak
    return base if not voice_variant else f"{base}+{voice_variant.lstrip('+')}"


def synthesize_with_phonemes(text: str, lang: str, voice_variant: str | None = None,
                             rate: int | None = None, pitch: int | None = None):
    """Like :func:`synthesize`, also returning ``[(sample_offset, phoneme), ...]``.

    Phonemes are espeak-ng mnemonics (Kirshenbaum-like ASCII, e.g. ``'h'``, ``'@U'``);
    ``sample_offset`` is the sample index where the phoneme starts; word boundaries are
    not included. Pauses appear as ``'_'``.
    """
    _check(text, lang)
    if rate is not None and not 80 <= rate <= 450:
        raise ValueError(f"rate {rate} outside 80..450 words per minute")
    if pitch is not None and not 0 <= pitch <= 100:
        raise ValueError(f"pitch {pitch} outside 0..100")
    eng = _engine()
    if voice_variant and voice_variant.lstrip("+") not in eng.variants:
        raise ValueError(f"espeak-ng has no voice variant {voice_variant!r}; e.g. {', '.join(sorted(eng.variants)[:8])}, ...")
    pcm, events = eng.run(text, _voice_name(lang, voice_variant),
                          DEFAULT_RATE if rate is None else rate,
                          DEFAULT_PITCH if pitch is None else pitch)
    audio = (pcm.astype(np.float32) / 32768.0)
    phonemes = [(s, p) for kind, s, p in events if kind == _EV_PHONEME and p]
    return audio, eng.sample_rate, phonemes


def synthesize(text: str, lang: str, voice_variant: str | None = None,
               rate: int | None = None, pitch: int | None = None) -> tuple[np.ndarray, int]:
    """Speak ``text`` in ``lang`` (a code of :mod:`helpers.backends.languages`, in its row's espeak-ng voice).

    Returns ``(audio, sample_rate)``: mono float32 in [-1, 1] at espeak-ng's rate (22050 Hz).
    ``voice_variant`` is an espeak-ng variant name such as ``'m3'``, ``'f2'`` or ``'klatt4'``;
    ``rate`` is words per minute (80..450), ``pitch`` 0..100. Raises ``ValueError`` for an
    unknown language, empty text or text longer than :data:`MAX_CHARS`.
    """
    audio, sr, _ = synthesize_with_phonemes(text, lang, voice_variant, rate, pitch)
    return audio, sr
