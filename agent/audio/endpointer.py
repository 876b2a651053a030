"""Endpointing: speech probabilities in, speech start/stop decisions out.

A sans-I/O state machine (no clocks, no audio): it is fed one probability per VAD window
with the window's sample offset and answers with events carrying sample offsets.

* Speech starts once ``min_speech_ms`` of windows at or above ``threshold`` have been
  seen without an intervening end; the start is backdated to the first speech window,
  minus ``speech_pad_ms``, so the recogniser hears the onset.
* Speech stops after ``silence_ms`` of windows below ``threshold - 0.15`` (hysteresis).
  The reported end is the first sample of that silence: the honest end of speech, where
  the latency clock starts, not the moment the endpointer gave up waiting.
* ``silence_ms`` may be changed while an utterance is open (adaptive end of turn: a
  partial that is already a complete command can end sooner).
"""

from __future__ import annotations

from dataclasses import dataclass

SAMPLE_RATE = 16_000


@dataclass(frozen=True, slots=True)
class EndpointerConfig:
    threshold: float = 0.5
    silence_ms: int = 600
    min_speech_ms: int = 90
    speech_pad_ms: int = 60
    max_utterance_s: float = 30.0


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    start_sample: int


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    start_sample: int
    end_sample: int
    # True when max_utterance_s forced the stop rather than silence.
    forced: bool = False


EndpointEvent = SpeechStarted | SpeechStopped


def _samples(ms: float) -> int:
    return int(ms * SAMPLE_RATE / 1000)


class Endpointer:
    def __init__(self, config: EndpointerConfig | None = None) -> None:
        self.config = config or EndpointerConfig()
        self.silence_ms = self.config.silence_ms
        self._negative = max(self.config.threshold - 0.15, 0.01)
        self._candidate_start: int | None = None  # first speech window, not yet confirmed
        self._speech_samples = 0
        self._start: int | None = None  # confirmed utterance start
        self._silence_start: int | None = None

    @property
    def in_speech(self) -> bool:
        return self._start is not None

    def feed(self, probability: float, window_start: int, window_len: int) -> list[EndpointEvent]:
        window_end = window_start + window_len
        if self._start is None:
            return self._feed_idle(probability, window_start, window_len)
        if probability >= self.config.threshold:
            self._silence_start = None
        elif probability < self._negative and self._silence_start is None:
            self._silence_start = window_start
        if self._silence_start is not None and (
            window_end - self._silence_start >= _samples(self.silence_ms)
        ):
            return [self._stop(self._silence_start)]
        if window_end - self._start >= _samples(self.config.max_utterance_s * 1000):
            return [self._stop(window_end, forced=True)]
        return []

    def flush(self, end_sample: int) -> list[EndpointEvent]:
        """The audio ended (the caller hung up or said session.end): close any utterance."""
        if self._start is None:
            self._candidate_start, self._speech_samples = None, 0
            return []
        return [self._stop(self._silence_start if self._silence_start is not None else end_sample)]

    def _feed_idle(
        self, probability: float, window_start: int, window_len: int
    ) -> list[EndpointEvent]:
        if probability < self.config.threshold:
            if probability < self._negative:
                self._candidate_start, self._speech_samples = None, 0
            return []
        if self._candidate_start is None:
            self._candidate_start = window_start
        self._speech_samples += window_len
        if self._speech_samples < _samples(self.config.min_speech_ms):
            return []
        self._start = max(0, self._candidate_start - _samples(self.config.speech_pad_ms))
        self._candidate_start, self._speech_samples = None, 0
        return [SpeechStarted(self._start)]

    def _stop(self, end_sample: int, *, forced: bool = False) -> SpeechStopped:
        assert self._start is not None
        event = SpeechStopped(self._start, end_sample, forced)
        self._start = self._silence_start = None
        self.silence_ms = self.config.silence_ms
        return event
