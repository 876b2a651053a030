"""VAD cost per audio chunk: Silero on onnxruntime, one thread, on the real recordings.

    python -m loadtest.bench_vad [--repeat 3]

Reports CPU time (process time, single thread) per 32 ms VAD window and per 20 ms
transport frame through the whole front end (windowing + VAD + endpointer), and the
fraction of one core a call's VAD uses in real time.
"""

from __future__ import annotations

import argparse
import time
import wave
from pathlib import Path

import numpy as np

from agent.audio.frontend import FrontEnd
from agent.audio.vad import WINDOW_SAMPLES, SileroVAD, VADState

SPEECH = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "speech"


def _audio() -> np.ndarray:
    paths = sorted(SPEECH.glob("*.wav")) + sorted((SPEECH / "real").glob("*.wav"))
    chunks = []
    for path in paths:
        with wave.open(str(path)) as wav:
            chunks.append(np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2"))
    return np.concatenate(chunks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    audio = _audio()
    seconds = len(audio) / 16_000
    vad = SileroVAD()
    windows = [
        audio[i : i + WINDOW_SAMPLES].astype(np.float32) / 32768.0
        for i in range(0, len(audio) - WINDOW_SAMPLES + 1, WINDOW_SAMPLES)
    ]
    per_window, per_frame = [], []
    for _ in range(args.repeat):
        state = VADState()
        start = time.process_time()
        for window in windows:
            vad.probability(state, window)
        per_window.append((time.process_time() - start) / len(windows))
        frontend = FrontEnd(vad)
        frames = [audio[i : i + 320] for i in range(0, len(audio), 320)]
        start = time.process_time()
        for frame in frames:
            frontend.process(frame)
        per_frame.append((time.process_time() - start) / len(frames))
    window_us, frame_us = min(per_window) * 1e6, min(per_frame) * 1e6
    print(f"audio: {seconds:.1f} s from {SPEECH.relative_to(SPEECH.parents[2])}")
    print(f"VAD window (32 ms): {window_us:.0f} us CPU")
    print(f"front end per 20 ms frame: {frame_us:.0f} us CPU")
    print(f"share of one core per real-time call: {frame_us / 20_000:.2%}")


if __name__ == "__main__":
    main()
