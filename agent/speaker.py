"""The call's voice: reply text in, paced audio out to a transport, barge-in handling.

Transports that carry audio back (telephony, the v1 socket when the client asks for
audio, WebRTC) hand every event of the call to :meth:`Speaker.handle`. Reply deltas are
synthesised phrase by phrase and played through the transport's :class:`AudioSink` at
real-time pace with a small lead, so that stopping is immediate: when the caller starts
speaking over the reply, the speaker stops synthesis, tells the sink to drop what is
queued (telephony ``clear``), cancels the reply in flight (and with it any LLM request),
and reports which phrases the caller actually heard.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.log import get_logger
from agent.tts.base import SAMPLE_RATE, SpeechSynthesizer, SynthesisStream, TTSError

log = get_logger("agent.speaker")

CHUNK_BYTES = SAMPLE_RATE * 2 // 10  # 100 ms of 16 kHz PCM16 per send


class AudioSink(Protocol):
    async def play(self, pcm16: bytes) -> None:
        """Send 16 kHz PCM16 audio towards the caller (the sink converts it)."""

    async def mark(self, name: str) -> None:
        """Ask to be told (Speaker.played) once the audio sent so far has been heard."""

    async def clear(self) -> None:
        """Drop audio queued for playback on the caller's side."""


@dataclass(eq=False)
class _Reply:
    turn: int
    stream: SynthesisStream
    task: asyncio.Task[None] | None = None
    phrases: dict[str, str] = field(default_factory=dict)  # mark name -> phrase
    heard: list[str] = field(default_factory=list)
    done_text: bool = False


class Speaker:
    """Args:
    tts: the synthesiser.
    sink: where audio goes.
    cancel_response: called on barge-in to stop the reply (and LLM) in flight.
    on_interrupted: called with (turn, heard_text) after a barge-in.
    lead_ms: how far ahead of real time audio is sent (what a barge-in cannot take back).
    """

    def __init__(
        self,
        tts: SpeechSynthesizer,
        sink: AudioSink,
        *,
        cancel_response: Callable[[], None],
        on_interrupted: Callable[[int, str], None] | None = None,
        lead_ms: int = 300,
    ) -> None:
        self._tts = tts
        self._sink = sink
        self._cancel_response = cancel_response
        self._on_interrupted = on_interrupted
        self._lead_s = lead_ms / 1000
        self._reply: _Reply | None = None
        # Real-time playback clock: when the audio sent so far ends, in monotonic time.
        self._playback_end = 0.0
        self.barge_ins = 0

    @property
    def speaking(self) -> bool:
        return self._reply is not None and (
            self._reply.task is None
            or not self._reply.task.done()
            or time.monotonic() < self._playback_end
        )

    async def handle(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "input_audio_buffer.speech_started" and self.speaking:
            await self.barge_in()
        elif kind == "response.text.delta":
            reply = await self._reply_for(event["turn"])
            await reply.stream.push(event["delta"])
        elif kind == "response.done" and self._reply and self._reply.turn == event["turn"]:
            if event.get("status") == "cancelled":
                await self.barge_in()
            else:
                self._reply.done_text = True
                await self._reply.stream.end()

    async def _reply_for(self, turn: int) -> _Reply:
        if self._reply is None or self._reply.turn != turn:
            if self._reply is not None:  # superseded by a newer turn's reply
                self._stop_task(self._reply)
                await self._reply.stream.aclose()
            self._reply = _Reply(turn, self._tts.stream())
            self._reply.task = asyncio.create_task(self._play(self._reply))
        return self._reply

    async def _play(self, reply: _Reply) -> None:
        try:
            async for chunk in reply.stream:
                for i in range(0, len(chunk.pcm16), CHUNK_BYTES):
                    await self._pace()
                    piece = chunk.pcm16[i : i + CHUNK_BYTES]
                    await self._sink.play(piece)
                    now = time.monotonic()
                    self._playback_end = max(self._playback_end, now) + len(piece) / (
                        2 * SAMPLE_RATE
                    )
                if chunk.last:
                    name = f"t{reply.turn}-p{chunk.phrase_index}"
                    reply.phrases[name] = chunk.phrase
                    await self._sink.mark(name)
        except TTSError as exc:
            log.warning("tts_failed", turn=reply.turn, error=str(exc))

    async def _pace(self) -> None:
        ahead = self._playback_end - time.monotonic() - self._lead_s
        if ahead > 0:
            await asyncio.sleep(ahead)

    def played(self, mark: str) -> None:
        """The sink reports that the audio up to ``mark`` was heard."""
        if self._reply and mark in self._reply.phrases:
            self._reply.heard.append(self._reply.phrases[mark])

    async def barge_in(self) -> None:
        reply, self._reply = self._reply, None
        if reply is None:
            return
        self.barge_ins += 1
        self._cancel_response()
        self._stop_task(reply)
        await reply.stream.aclose()
        await self._sink.clear()
        self._playback_end = 0.0
        heard = " ".join(reply.heard)
        log.info("barge_in", turn=reply.turn, heard=heard)
        if self._on_interrupted:
            self._on_interrupted(reply.turn, heard)

    def _stop_task(self, reply: _Reply) -> None:
        if reply.task and not reply.task.done():
            reply.task.cancel()

    async def aclose(self) -> None:
        reply, self._reply = self._reply, None
        if reply:
            self._stop_task(reply)
            with contextlib.suppress(Exception):
                await reply.stream.aclose()
