"""Per-call audio front end: 16 kHz PCM chunks in, VAD decisions and speech audio out.

Cuts arbitrary-size chunks into VAD windows, runs the shared Silero model with this
call's state, feeds the endpointer, and hands the recogniser the audio of each
utterance, starting at the (backdated) speech start so the onset is not lost.
Synchronous and CPU-bound: the pipeline runs :meth:`FrontEnd.process` in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agent.audio.endpointer import Endpointer, EndpointerConfig, SpeechStarted, SpeechStopped
from agent.audio.vad import WINDOW_SAMPLES, SileroVAD, VADState

# Audio kept behind the VAD position, enough to replay the pre-speech padding and the
# windows needed to confirm a start.
_HISTORY_SAMPLES = 16_000


@dataclass(frozen=True, slots=True)
class SpeechAudio:
    """Audio of the open utterance, ``start_sample`` being its first sample's offset."""

    start_sample: int
    pcm16: bytes


FrontEndEvent = SpeechStarted | SpeechAudio | SpeechStopped


class FrontEnd:
    def __init__(self, vad: SileroVAD, config: EndpointerConfig | None = None) -> None:
        self._vad = vad
        self._state = VADState()
        self.endpointer = Endpointer(config)
        self._history = np.zeros(0, dtype=np.int16)
        self._history_start = 0  # call offset of _history[0]
        self._vad_position = 0  # call offset of the next sample the VAD has not seen

    @property
    def samples_received(self) -> int:
        return self._history_start + len(self._history)

    def process(self, samples: np.ndarray) -> list[FrontEndEvent]:
        self._history = np.concatenate([self._history, samples.astype(np.int16, copy=False)])
        events: list[FrontEndEvent] = []
        while self.samples_received - self._vad_position >= WINDOW_SAMPLES:
            start = self._vad_position
            window = self._slice(start, start + WINDOW_SAMPLES)
            probability = self._vad.probability(self._state, window.astype(np.float32) / 32768.0)
            self._vad_position += WINDOW_SAMPLES
            was_in_speech = self.endpointer.in_speech
            decisions = self.endpointer.feed(probability, start, WINDOW_SAMPLES)
            if was_in_speech and not decisions:
                events.append(SpeechAudio(start, window.tobytes()))
            for decision in decisions:
                events.append(decision)
                if isinstance(decision, SpeechStarted):
                    # Replay from the backdated start up to the end of this window.
                    first = max(decision.start_sample, self._history_start)
                    events.append(
                        SpeechAudio(first, self._slice(first, start + WINDOW_SAMPLES).tobytes())
                    )
        self._trim()
        return events

    def flush(self) -> list[FrontEndEvent]:
        """End of the audio: close an open utterance at the last sample received."""
        return list(self.endpointer.flush(self.samples_received))

    def _slice(self, begin: int, end: int) -> np.ndarray:
        return self._history[begin - self._history_start : end - self._history_start]

    def _trim(self) -> None:
        keep_from = self._vad_position - _HISTORY_SAMPLES
        if keep_from > self._history_start:
            self._history = self._history[keep_from - self._history_start :].copy()
            self._history_start = keep_from
