"""The streaming speech-recognition interface every ASR backend implements.

Three levels, matching the lifetimes of what a backend holds:

* :class:`SpeechRecognizer` - process-wide; loads models or opens channels once.
* :class:`CallRecognizer`   - one per call; holds per-call state such as a decoder
  built with the caller's payee names, or a gRPC stub.
* :class:`UtteranceStream`  - one per utterance (VAD speech start -> speech end):
  audio goes in with :meth:`~UtteranceStream.send`, :meth:`~UtteranceStream.end`
  says no more audio follows, and iterating the stream yields partial hypotheses
  followed by exactly one final hypothesis, after which iteration stops.

Audio is always 16 kHz mono PCM16 (little-endian bytes): transports convert at the edge.
Sample offsets in hypotheses count from the start of the call's audio, so they line up
with the VAD's offsets and the per-call clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

SAMPLE_RATE = 16_000


@dataclass(frozen=True, slots=True)
class Word:
    text: str
    start_sample: int
    end_sample: int
    confidence: float | None = None


@dataclass(frozen=True, slots=True)
class Hypothesis:
    """A partial or final transcript of one utterance."""

    text: str
    is_final: bool
    start_sample: int
    end_sample: int
    confidence: float | None = None
    words: tuple[Word, ...] = ()
    # Which decoder produced it, e.g. "sphinx-domain", "whisper", "riva".
    source: str = ""


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a backend may use to bias recognition for one caller."""

    call_id: str
    # Names the caller is likely to say: saved payees, billers. Riva boosts them;
    # the embedded decoder adds them to its per-call language model.
    phrases: Sequence[str] = field(default_factory=tuple)
    language: str = "en-US"


class ASRError(Exception):
    """A backend failed in a way the pipeline should report (code ``asr_unavailable``)."""


class UtteranceStream(Protocol):
    async def send(self, pcm16: bytes, start_sample: int) -> None:
        """Feed audio; ``start_sample`` is the call offset of its first sample."""

    async def end(self) -> None:
        """No more audio for this utterance: the final hypothesis follows."""

    def __aiter__(self) -> AsyncIterator[Hypothesis]: ...

    async def aclose(self) -> None:
        """Abandon the utterance (hang-up, barge-in); idempotent."""


class CallRecognizer(Protocol):
    def utterance(self) -> UtteranceStream: ...

    async def aclose(self) -> None: ...


class SpeechRecognizer(Protocol):
    name: str

    async def start_call(self, context: CallContext) -> CallRecognizer: ...

    async def aclose(self) -> None: ...
