"""The streaming speech-synthesis interface.

Text arrives as deltas (reply phrases or LLM tokens); :class:`PhraseSplitter` cuts it into
phrases, and each phrase is synthesised as soon as it is complete, so the caller hears
the first words before the whole reply exists. Audio comes out as 16 kHz mono PCM16, the
pipeline's format; transports convert it for the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

SAMPLE_RATE = 16_000


@dataclass(frozen=True, slots=True)
class SpeechChunk:
    """Audio of (part of) one phrase. Each phrase ends with an empty chunk, ``last=True``."""

    pcm16: bytes
    phrase: str
    phrase_index: int
    last: bool


class TTSError(Exception):
    """The synthesiser failed; the reply stays available as text."""


class SynthesisStream(Protocol):
    async def push(self, text: str) -> None:
        """Add reply text; complete phrases start synthesising at once."""

    async def end(self) -> None:
        """No more text: the rest is synthesised, then iteration stops."""

    def __aiter__(self) -> AsyncIterator[SpeechChunk]: ...

    async def aclose(self) -> None:
        """Stop now (barge-in, hang-up): pending phrases are dropped; idempotent."""


class SpeechSynthesizer(Protocol):
    name: str

    def stream(self) -> SynthesisStream: ...

    async def aclose(self) -> None: ...
