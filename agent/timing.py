"""One monotonic clock per call, and the per-turn stage timings named in DESIGN.md.

Times are seconds since the call started. The audio clock maps a sample offset to the
moment the frame holding that sample reached the server, so ``speech_end`` is when the
last speech sample arrived, not when the endpointer decided the turn was over.
"""

from __future__ import annotations

import bisect
import time
from collections import deque

STAGES = (
    "speech_start",
    "speech_end",
    "asr_first_partial",
    "asr_final",
    "understanding_ready",
    "llm_request",
    "llm_first_token",
    "llm_done",
    "response_first_delta",
    "response_done",
)


class CallClock:
    def __init__(self) -> None:
        self._origin = time.monotonic()
        # (end sample, arrival time) of recent frames; 2,000 frames is over 30 s of audio.
        self._ends: deque[int] = deque(maxlen=2_000)
        self._arrivals: deque[float] = deque(maxlen=2_000)

    def now(self) -> float:
        return time.monotonic() - self._origin

    def audio_arrived(self, end_sample: int, at: float | None = None) -> None:
        self._ends.append(end_sample)
        self._arrivals.append(self.now() if at is None else at)

    def time_of_sample(self, sample: int) -> float:
        """Arrival time of the frame that carried ``sample`` (or the nearest one we know)."""
        if not self._ends:
            return self.now()
        index = bisect.bisect_right(self._ends, sample)
        return self._arrivals[min(index, len(self._arrivals) - 1)]


class TurnTimings:
    """Stage -> time for one turn; the first mark of a stage wins."""

    def __init__(self, clock: CallClock) -> None:
        self._clock = clock
        self.stages: dict[str, float] = {}

    def mark(self, stage: str, at: float | None = None) -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}")
        self.stages.setdefault(stage, self._clock.now() if at is None else at)

    def stages_ms(self) -> dict[str, float]:
        return {name: round(t * 1000, 1) for name, t in self.stages.items()}

    def latencies_ms(self) -> dict[str, float]:
        """Each later stage measured from the end of speech, the honest start."""
        end = self.stages.get("speech_end")
        if end is None:
            return {}
        return {
            f"speech_end_to_{name}": round((t - end) * 1000, 1)
            for name, t in self.stages.items()
            if STAGES.index(name) > STAGES.index("speech_end")
        }
