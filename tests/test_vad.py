"""Silero VAD through the front end on real recordings."""

import itertools
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from agent.audio.endpointer import EndpointerConfig, SpeechStarted, SpeechStopped
from agent.audio.frontend import FrontEnd, SpeechAudio
from agent.audio.vad import SileroVAD

SPEECH = Path(__file__).parent / "fixtures" / "speech"


def load(name: str) -> np.ndarray:
    with wave.open(str(SPEECH / name)) as wav:
        assert wav.getframerate() == 16_000
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")


@pytest.fixture(scope="module")
def vad() -> SileroVAD:
    return SileroVAD()


def feed(vad: SileroVAD, samples: np.ndarray, frame: int = 320) -> list[object]:
    frontend = FrontEnd(vad, EndpointerConfig(silence_ms=600))
    events: list[object] = []
    padded = np.concatenate([samples, np.zeros(16_000, dtype=np.int16)])
    for i in range(0, len(padded), frame):
        events += frontend.process(padded[i : i + frame])
    return events


def test_silence_and_noise_are_not_speech(vad: SileroVAD) -> None:
    rng = np.random.default_rng(0)
    noise = (rng.standard_normal(16_000 * 3) * 200).astype(np.int16)
    assert feed(vad, np.zeros(16_000 * 3, dtype=np.int16)) == []
    assert feed(vad, noise) == []


def test_fixture_utterance_is_one_turn_with_its_audio(vad: SileroVAD) -> None:
    samples = load("balance_01.wav")  # speech 0.30 s .. 1.28 s
    events = feed(vad, samples)
    starts = [e for e in events if isinstance(e, SpeechStarted)]
    stops = [e for e in events if isinstance(e, SpeechStopped)]
    assert len(starts) == len(stops) == 1
    assert 0.15 * 16_000 <= starts[0].start_sample <= 0.40 * 16_000
    assert 1.15 * 16_000 <= stops[0].end_sample <= 1.50 * 16_000
    audio = [e for e in events if isinstance(e, SpeechAudio)]
    assert audio[0].start_sample == starts[0].start_sample
    # Contiguous: every window of the turn reaches the recogniser exactly once.
    for before, after in itertools.pairwise(audio):
        assert after.start_sample == before.start_sample + len(before.pcm16) // 2


def test_real_recording_splits_at_long_pauses(vad: SileroVAD) -> None:
    events = feed(vad, load("real/jfk.wav"))
    stops = [e for e in events if isinstance(e, SpeechStopped)]
    assert 2 <= len(stops) <= 5
    assert stops[-1].end_sample > 10 * 16_000


def test_frame_size_does_not_change_decisions(vad: SileroVAD) -> None:
    samples = load("transfer_01.wav")

    def decisions(frame: int) -> list[object]:
        return [e for e in feed(vad, samples, frame) if not isinstance(e, SpeechAudio)]

    assert decisions(160) == decisions(320) == decisions(4000)


def test_vad_does_not_import_torch() -> None:
    code = (
        "import sys; from agent.audio.vad import SileroVAD; SileroVAD(); "
        "sys.exit('torch' in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)
