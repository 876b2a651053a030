"""WebRTC audio for a protocol-v1 call (the browser widget), on aiortc.

Signalling rides on the call's WebSocket: the client sends ``webrtc.offer`` (a complete,
non-trickle SDP offer) after ``session.start``; :func:`handle_offer` answers with
``webrtc.answer``. From then on the caller's microphone arrives as Opus over SRTP instead
of binary frames, and every other event stays on the WebSocket.

    inbound track  -> av.AudioFrame (48 kHz Opus, decoded by aiortc in its own thread)
                   -> mono int16 at the session's rate -> Call.feed_audio
                      (the pipeline's AudioDecoder converts to 16 kHz at the edge)
    call events    -> Speaker (agent/speaker.py) -> ReplyTrack (a queue of 48 kHz audio,
                      20 ms frames at real-time pace, silence when empty)
                   -> aiortc's Opus encoder -> the browser's <audio> element

Barge-in: the speaker calls the sink's ``clear``, which empties the track's queue, so
the caller stops hearing the reply within one 20 ms frame. Marks are reported once the
audio before them has left in a frame. Without a synthesiser (``tts.backend = "none"``)
the answer has no outbound track: the reply is text only.

The peer connection lives as long as the call's WebSocket. ICE uses host candidates only
(no STUN or TURN servers); see :func:`_include_loopback` for 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import time
from typing import TYPE_CHECKING, Any

import aioice.ice
import av
import numpy as np
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError
from websockets.asyncio.server import ServerConnection

from agent.log import get_logger
from agent.pipeline import Call, SlowConsumer
from agent.speaker import Speaker
from protocol import events
from protocol.codecs import StreamResampler, pcm16_to_array
from protocol.events import ErrorCode, ProtocolError

if TYPE_CHECKING:
    from agent.services import Services

log = get_logger("agent.transports.webrtc")

RATE = 48_000  # Opus in WebRTC; aiortc decodes to and encodes from 48 kHz
FRAME_SAMPLES = RATE // 50  # 20 ms
FRAME_BYTES = FRAME_SAMPLES * 2
MAX_QUEUED_S = 10.0  # reply audio queued for the track; the speaker keeps ~0.3 s ahead
SPOKEN_EVENTS = frozenset(
    {"input_audio_buffer.speech_started", "response.text.delta", "response.done"}
)
SPEAKER_QUEUE = 256
ANSWER_TIMEOUT_S = 10.0


def _include_loopback() -> None:
    """Offer 127.0.0.1 as a host candidate too.

    aioice gathers host candidates from every interface address except 127.0.0.1
    (``aioice.ice.get_host_addresses``). A browser on the same machine as the server, or
    one in a network namespace with only ``lo`` (the end-to-end test), can then not
    connect at all. Adding the loopback address is harmless elsewhere: a remote peer's
    checks against it simply fail and another pair is chosen. Wraps the function once,
    process-wide; nothing else of aioice is changed.
    """
    original = aioice.ice.get_host_addresses
    if getattr(original, "includes_loopback", False):
        return

    def get_host_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        addresses = original(use_ipv4=use_ipv4, use_ipv6=use_ipv6)
        if use_ipv4 and "127.0.0.1" not in addresses:
            addresses.append("127.0.0.1")
        return addresses

    get_host_addresses.includes_loopback = True  # type: ignore[attr-defined]
    aioice.ice.get_host_addresses = get_host_addresses


_include_loopback()


class ReplyTrack(MediaStreamTrack):
    """The agent's voice as a WebRTC audio track: 20 ms frames of 48 kHz mono PCM16 from
    a queue, paced in real time; silence whenever the queue is empty."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._queue = bytearray()
        self._consumed = 0  # bytes of queued audio sent so far, in total
        self._marks: list[tuple[int, str]] = []  # (byte position, name)
        self._start: float | None = None
        self._pts = 0
        self.on_mark: Any = None  # called with a mark's name once its audio has left
        self.dropped_s = 0.0

    def push(self, pcm16_48k: bytes) -> None:
        self._queue += pcm16_48k
        excess = len(self._queue) - int(MAX_QUEUED_S * RATE) * 2
        if excess > 0:  # nobody is reading the track (no connection): keep it bounded
            excess += excess % 2
            del self._queue[:excess]
            self._consumed += excess
            self.dropped_s += excess / (2 * RATE)

    @property
    def queued_s(self) -> float:
        return len(self._queue) / (2 * RATE)

    def mark(self, name: str) -> None:
        self._marks.append((self._consumed + len(self._queue), name))

    def clear(self) -> None:
        """Barge-in: drop the queued audio and its marks (never heard)."""
        self._queue.clear()
        self._marks.clear()

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        else:
            self._pts += FRAME_SAMPLES
            wait = self._start + self._pts / RATE - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        data = bytes(self._queue[:FRAME_BYTES])
        del self._queue[:FRAME_BYTES]
        self._consumed += len(data)
        while self._marks and self._marks[0][0] <= self._consumed:
            _, name = self._marks.pop(0)
            if self.on_mark:
                self.on_mark(name)
        frame = av.AudioFrame(format="s16", layout="mono", samples=FRAME_SAMPLES)
        frame.planes[0].update(data.ljust(FRAME_BYTES, b"\0"))
        frame.pts = self._pts
        frame.sample_rate = RATE
        frame.time_base = fractions.Fraction(1, RATE)
        return frame


class TrackSink:
    """Speaker audio (16 kHz PCM16) -> the reply track (48 kHz)."""

    def __init__(self, track: ReplyTrack) -> None:
        self._track = track
        self._resampler = StreamResampler(16_000, RATE)

    async def play(self, pcm16: bytes) -> None:
        samples = self._resampler.process(pcm16_to_array(pcm16))
        self._track.push(samples.astype("<i2").tobytes())

    async def mark(self, name: str) -> None:
        self._track.mark(name)

    async def clear(self) -> None:
        self._track.clear()
        self._resampler = StreamResampler(16_000, RATE)


def mono_int16(frame: av.AudioFrame) -> np.ndarray:
    """A decoded frame (any s16 layout, packed or planar) -> mono int16 samples."""
    if frame.format.name not in ("s16", "s16p"):
        frame = av.AudioResampler(format="s16", layout=frame.layout.name).resample(frame)[0]
    channels = len(frame.layout.channels)
    data = frame.to_ndarray()
    if frame.format.is_planar:
        samples = data.reshape(channels, -1).T
    else:
        samples = data.reshape(-1, channels)
    if channels == 1:
        return samples[:, 0].astype(np.int16)
    return samples.mean(axis=1).round().astype(np.int16)


class WebRTCAudio:
    """One call's peer connection: microphone in, spoken reply out."""

    def __init__(self, ws: ServerConnection, call: Call, services: Services) -> None:
        self.call = call
        self.log = call.log.bind(transport="webrtc")
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self._tasks: set[asyncio.Task[None]] = set()
        self._resampler: StreamResampler | None = None
        self._rate = call.session.sample_rate
        self.track: ReplyTrack | None = None
        self.speaker: Speaker | None = None
        if services.tts is not None:
            self.track = ReplyTrack()
            self.speaker = Speaker(
                services.tts,
                TrackSink(self.track),
                cancel_response=call.cancel_response,
                on_interrupted=lambda turn, heard: self.log.info(
                    "reply_interrupted", turn=turn, heard=heard
                ),
                lead_ms=services.config.tts.lead_ms,
            )
            self.track.on_mark = self.speaker.played
            self._spoken: asyncio.Queue[dict[str, Any]] = asyncio.Queue(SPEAKER_QUEUE)
            call.outbox.listeners.append(self._hear)
            self._spawn(self._speak(self._spoken))
        self.pc.on("track", self._on_track)
        self.pc.on("connectionstatechange", self._on_state)
        self._spawn(self._close_with(ws))

    def _hear(self, event: dict[str, Any]) -> None:
        """Outbox listener: a copy of the events the speaker acts on (replies, speech
        starts); the socket still gets every event."""
        if event["type"] in SPOKEN_EVENTS:
            try:
                self._spoken.put_nowait(event)
            except asyncio.QueueFull:
                log.warning("speaker_queue_full", dropped=event["type"])

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def answer(self, offer_sdp: str) -> str:
        async with asyncio.timeout(ANSWER_TIMEOUT_S):
            await self.pc.setRemoteDescription(RTCSessionDescription(offer_sdp, "offer"))
            if not any(t.kind == "audio" for t in self.pc.getTransceivers()):
                raise ValueError("the offer has no audio section")
            if self.track is not None:
                self.pc.addTrack(self.track)
            # Non-trickle: aiortc gathers every candidate before the answer is complete.
            await self.pc.setLocalDescription(await self.pc.createAnswer())
        return self.pc.localDescription.sdp

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio":
            self.log.info("webrtc_track", kind=track.kind)
            self._spawn(self._pump(track))

    async def _on_state(self) -> None:
        state = self.pc.connectionState
        self.log.info("webrtc_state", state=state)
        if state == "failed":
            await self.pc.close()

    async def _pump(self, track: MediaStreamTrack) -> None:
        """The caller's microphone -> the call, as PCM16 at the session's rate."""
        frames = 0
        try:
            while True:
                frame = await track.recv()
                samples = mono_int16(frame)
                if frame.sample_rate != self._rate:
                    if self._resampler is None:
                        self._resampler = StreamResampler(frame.sample_rate, self._rate)
                    samples = self._resampler.process(samples)
                if len(samples):
                    await self.call.feed_audio(samples.astype("<i2").tobytes())
                frames += 1
        except MediaStreamError:
            pass  # the browser stopped sending or the connection closed
        except (SlowConsumer, ProtocolError) as exc:
            self.log.warning("webrtc_audio_stopped", error=str(exc))
        finally:
            self.log.info("webrtc_audio_ended", frames=frames)

    async def _speak(self, spoken: asyncio.Queue[dict[str, Any]]) -> None:
        assert self.speaker is not None
        while True:
            event = await spoken.get()
            try:
                await self.speaker.handle(event)
            except Exception:
                self.log.exception("speaker_failed", event=event["type"])

    async def _close_with(self, ws: ServerConnection) -> None:
        await ws.wait_closed()
        await self.close()

    async def close(self) -> None:
        _sessions.pop(self.call, None)
        current = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._hear in self.call.outbox.listeners:
            self.call.outbox.listeners.remove(self._hear)
        if self.speaker is not None:
            await self.speaker.aclose()
        if self.track is not None:
            self.track.stop()
        with contextlib.suppress(Exception):
            await self.pc.close()
        self.log.info("webrtc_closed")


_sessions: dict[Call, WebRTCAudio] = {}


async def handle_offer(ws: ServerConnection, call: Call, services: Services, sdp: str) -> None:
    """``webrtc.offer`` -> a peer connection for the call and ``webrtc.answer`` on its
    outbox. One offer per call; failures are ``webrtc_failed`` and the call goes on."""
    if call in _sessions:
        raise ProtocolError(
            ErrorCode.INVALID_EVENT, "webrtc.offer: this call already has a peer connection"
        )
    if call.session.codec != "pcm16":  # decoded WebRTC audio is fed as PCM16
        raise ProtocolError(
            ErrorCode.INVALID_EVENT,
            "webrtc.offer: start the session with codec 'pcm16' (and sample_rate 48000)",
        )
    session = WebRTCAudio(ws, call, services)
    _sessions[call] = session
    try:
        answer = await session.answer(sdp)
    except Exception as exc:  # aiortc: ValueError and its own errors for SDP it refuses
        session.log.warning("webrtc_offer_refused", error=repr(exc))
        await session.close()
        raise ProtocolError(
            ErrorCode.WEBRTC_FAILED, f"could not answer the WebRTC offer: {exc or repr(exc)}"
        ) from None
    except BaseException:
        await session.close()
        raise
    call.outbox.put(events.webrtc_answer_event(answer))
