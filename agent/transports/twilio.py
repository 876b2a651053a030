"""Telephony bridge: Twilio Media Streams over WebSocket (path ``/twilio``).

A phone call's media stream becomes an ordinary :class:`~agent.pipeline.Call`: inbound
mu-law 8 kHz is reordered by sequence number and fed to the pipeline (which converts it
to 16 kHz PCM at the edge), keypad digits become typed turns, and the reply is spoken
back as outbound ``media`` with a ``mark`` after each phrase. When the caller talks over
the reply the speaker sends ``clear`` and keeps only what the marks say was played.

The caller's identity is the signed session token in the stream's custom parameters
(``token``, optionally with ``customer_id``, which must agree), set by the telephony
provider's stream instruction; without a valid token the stream is closed (1008).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from agent import auth
from agent.log import get_logger
from agent.pipeline import Call, Outbox, SlowConsumer
from agent.speaker import Speaker
from protocol import events, telephony
from protocol.codecs import StreamResampler, mulaw_encode, pcm16_to_array

if TYPE_CHECKING:
    from agent.services import Services

log = get_logger("agent.transports.twilio")

# Keypad: single keys answer questions; longer entries are digits for the understanding.
DTMF_WORDS = {"1": "yes", "2": "no", "*": "cancel"}
DTMF_IDLE_S = 1.5
START_TIMEOUT_S = 10.0


class TwilioSink:
    """Speaker audio -> outbound media messages (mu-law 8 kHz), marks and clear."""

    def __init__(self, ws: ServerConnection, stream_sid: str) -> None:
        self._ws = ws
        self._sid = stream_sid
        self._resampler = StreamResampler(16_000, telephony.MULAW_RATE)

    async def play(self, pcm16: bytes) -> None:
        samples = self._resampler.process(pcm16_to_array(pcm16))
        await self._ws.send(telephony.media_message(self._sid, mulaw_encode(samples)))

    async def mark(self, name: str) -> None:
        await self._ws.send(telephony.mark_message(self._sid, name))

    async def clear(self) -> None:
        await self._ws.send(telephony.clear_message(self._sid))


class DtmfCollector:
    """Digits until '#' or a pause; then one typed turn."""

    def __init__(self, submit: asyncio.Queue[str]) -> None:
        self._digits = ""
        self._submit = submit
        self._timer: asyncio.TimerHandle | None = None

    def press(self, digit: str) -> None:
        if self._timer:
            self._timer.cancel()
        if digit == "#":
            self.flush()
            return
        self._digits += digit
        self._timer = asyncio.get_running_loop().call_later(DTMF_IDLE_S, self.flush)

    def flush(self) -> None:
        digits, self._digits = self._digits, ""
        if digits:
            self._submit.put_nowait(DTMF_WORDS.get(digits, digits))


async def serve_twilio(ws: ServerConnection, services: Services) -> None:
    start = await _await_start(ws)
    if start is None:
        return
    params = start.custom_parameters
    try:
        profile = auth.identify(
            params.get("token"), params.get("customer_id"), services.config.auth.secret
        )
    except auth.InvalidToken as exc:
        # The carrier has no channel for an error event: log it and hang up.
        log.warning("unauthorized", transport="twilio", error=str(exc))
        await ws.close(CloseCode.POLICY_VIOLATION, "unauthorized")
        return
    session = events.SessionStart(
        sample_rate=telephony.MULAW_RATE,
        codec="mulaw",
        customer_id=profile.id,
        token=params.get("token"),
    )
    outbox = Outbox(services.config.server.outbox_events)
    call = Call(services, session, profile, outbox)
    bound = log.bind(call_id=call.id, stream_sid=start.stream_sid, call_sid=start.call_sid)
    speaker = Speaker(
        services.tts,
        TwilioSink(ws, start.stream_sid),
        cancel_response=call.cancel_response,
        on_interrupted=lambda turn, heard: bound.info("reply_interrupted", turn=turn, heard=heard),
    )
    typed: asyncio.Queue[str] = asyncio.Queue()
    dtmf = DtmfCollector(typed)
    reorderer = telephony.MediaReorderer()
    await call.start()
    voice = asyncio.create_task(_speak(outbox, speaker))
    keypad = asyncio.create_task(_type(typed, call))
    reason = "hangup"
    try:
        async for message in ws:
            try:
                event = telephony.parse_message(message)
            except telephony.TelephonyError as exc:
                bound.warning("telephony_bad_message", error=str(exc))
                continue
            if isinstance(event, telephony.Media):
                for payload in reorderer.push(event):
                    await call.feed_audio(payload)
            elif isinstance(event, telephony.Dtmf):
                dtmf.press(event.digit)
            elif isinstance(event, telephony.MarkEcho):
                speaker.played(event.name)
            elif isinstance(event, telephony.Stop):
                reason = "stop"
                break
        # The caller hung up (stop, or the socket closed): finish what they said.
        for payload in reorderer.flush():
            await call.feed_audio(payload)
        dtmf.flush()
        await asyncio.sleep(0)  # let the keypad task submit a last entry
        async with asyncio.timeout(15):
            await call.finish()
    except (ConnectionClosed, SlowConsumer):
        reason = "disconnected"
    except TimeoutError:
        bound.warning("finish_timed_out")
    finally:
        keypad.cancel()
        await call.close(reason)
        outbox.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(voice, 5)
        voice.cancel()
        await speaker.aclose()
        bound.info(
            "telephony_stream_ended",
            reason=reason,
            dropped=reorderer.dropped,
            filled_ms=reorderer.filled_ms,
            barge_ins=speaker.barge_ins,
        )


async def _await_start(ws: ServerConnection) -> telephony.Start | None:
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            async for message in ws:
                try:
                    event = telephony.parse_message(message)
                except telephony.TelephonyError as exc:
                    log.warning("telephony_bad_message", error=str(exc))
                    continue
                if isinstance(event, telephony.Start):
                    return event
                if isinstance(event, telephony.Stop):
                    return None
    except (TimeoutError, ConnectionClosed):
        log.warning("telephony_no_start")
    return None


async def _speak(outbox: Outbox, speaker: Speaker) -> None:
    """The call's events -> the caller's ear. Telephony has no channel for text events."""
    with contextlib.suppress(ConnectionClosed):
        while (event := await outbox.get()) is not None:
            await speaker.handle(event)


async def _type(typed: asyncio.Queue[str], call: Call) -> None:
    while True:
        call.input_text(await typed.get())
