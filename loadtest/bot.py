"""One bot: one call over the real protocol, a scripted conversation at real-time pace.

The bot streams audio without a gap from ``session.start`` to ``session.end``, as a
phone line does: a turn's audio, then silence while it waits for the server's reply,
a short think time, the next turn. Every frame is paced against the call's start time
(20 ms per frame), so the stream neither drifts nor bursts; how late frames left is
recorded (``pacing_lag_ms``) because a late load generator would flatter the server.

Per turn it times, from the moment the frame holding the turn's last speech sample was
sent (end of speech, the honest start of the latency clock), the arrival of the turn's
``speech_stopped``, final transcript, ``understanding``, first response delta and
``response.done``; and it keeps the server's own ``turn.metrics`` latencies.

Which server turn answers a scripted turn: the turns whose ``speech_started`` arrived
after the bot began speaking it (the previous turn is complete by then). Normally that
is one turn; if the server split the utterance, the last one is timed (its end is the
real end of speech) and the others are counted as ``split``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from loadtest.conversations import RATE, Conversation, Utterance

FRAME_MS = 20
FRAME = RATE * FRAME_MS // 1000
SILENCE = np.zeros(FRAME, dtype=np.int16).tobytes()

# Caller-side stages: name -> server event type, in the order they should arrive.
CLIENT_STAGES = {
    "speech_stopped": "input_audio_buffer.speech_stopped",
    "final_transcript": "input_audio_transcription.completed",
    "understanding": "understanding",
    "first_response_delta": "response.text.delta",
    "response_done": "response.done",
}
# Errors after which a turn will get no reply.
TURN_FATAL_ERRORS = {"asr_unavailable", "internal_error"}

# Final statuses. Every scripted turn of every call ends with exactly one.
TURN_STATUSES = ("ok", "timeout", "error", "dropped", "rejected", "cancelled")
CALL_STATUSES = ("completed", "dropped", "rejected", "timeout", "cancelled")


@dataclass
class BotOptions:
    turn_timeout_s: float = 15.0  # end of speech -> turn.metrics
    think_s: tuple[float, float] = (0.3, 1.0)  # silence between a reply and the next turn
    lead_silence_s: float = 0.2  # silence before the first turn
    connect_timeout_s: float = 10.0
    end_timeout_s: float = 15.0  # session.end -> session.ended
    customer_id: str = "cust-001"
    token: str | None = None  # signed session token (python -m agent token)


@dataclass
class TurnRecord:
    call: int
    conversation: str
    index: int
    audio: str
    expected_intent: str
    status: str = "pending"
    server_turn: int | None = None
    split: int = 0
    client_ms: dict[str, float] = field(default_factory=dict)
    server_ms: dict[str, float] = field(default_factory=dict)
    transcript: str | None = None
    intent: str | None = None
    path: str | None = None
    response_status: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class CallRecord:
    call: int
    conversation: str
    started_at: float  # seconds since the level began
    status: str = "pending"
    duration_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    pacing_lag_ms_max: float = 0.0
    late_frames: int = 0  # frames sent over 50 ms behind schedule
    frames: int = 0
    turns: list[TurnRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["turns"] = [t.to_dict() for t in self.turns]
        return out

    def settle(self, turn_status: str, call_status: str) -> None:
        """Close the books: turns never finished get ``turn_status``."""
        for turn in self.turns:
            if turn.status == "pending":
                turn.status = turn_status
        if self.status == "pending":
            self.status = call_status


class _Line:
    """The socket, the received events with their arrival times, and the frame clock."""

    def __init__(self, ws: Any, record: CallRecord) -> None:
        self.ws = ws
        self.record = record
        self.events: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.changed = asyncio.Event()
        self.began = time.monotonic()
        self.sent = 0

    async def receive(self) -> None:
        async for message in self.ws:
            event = orjson.loads(message)
            self.events.append(event)
            self.times.append(time.monotonic())
            if event.get("type") == "error":
                self.record.errors.append(str(event.get("code")))
            self.changed.set()

    async def frame(self, pcm: bytes) -> float:
        """Send one frame at its place on the call's timeline; returns when it left."""
        due = self.began + self.sent * FRAME_MS / 1000
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await self.ws.send(pcm)
        sent_at = time.monotonic()
        lag_ms = max(0.0, (sent_at - due) * 1000)
        self.record.pacing_lag_ms_max = max(self.record.pacing_lag_ms_max, round(lag_ms, 1))
        self.record.late_frames += lag_ms > 50
        self.record.frames += 1
        self.sent += 1
        return sent_at

    async def speak(self, utterance: Utterance) -> float:
        """Stream an utterance; returns when the frame with its last speech sample left."""
        samples = utterance.samples
        speech_end_at = 0.0
        for offset in range(0, len(samples), FRAME):
            chunk = samples[offset : offset + FRAME]
            if len(chunk) < FRAME:
                chunk = np.concatenate([chunk, np.zeros(FRAME - len(chunk), np.int16)])
            sent_at = await self.frame(chunk.astype("<i2").tobytes())
            if not speech_end_at and offset + FRAME >= utterance.speech_end:
                speech_end_at = sent_at
        return speech_end_at

    async def silence(self, seconds: float) -> None:
        for _ in range(max(0, round(seconds * 1000 / FRAME_MS))):
            await self.frame(SILENCE)

    async def silence_until(self, done: Any, deadline: float) -> bool:
        """Send silence until ``done()`` is true (checked every frame) or the deadline."""
        while not done():
            if time.monotonic() >= deadline:
                return False
            await self.frame(SILENCE)
        return True


def _turn_state(line: _Line, first_event: int) -> tuple[list[int], set[int], str | None]:
    """Server turns started since ``first_event``, those with metrics, a fatal error."""
    started: list[int] = []
    finished: set[int] = set()
    fatal = None
    for event in line.events[first_event:]:
        kind = event.get("type")
        if kind == "input_audio_buffer.speech_started":
            started.append(event["turn"])
        elif kind == "turn.metrics":
            finished.add(event["turn"])
        elif kind == "error" and event.get("code") in TURN_FATAL_ERRORS:
            fatal = str(event.get("code"))
    return started, finished, fatal


def _fill_turn(turn: TurnRecord, line: _Line, first_event: int, speech_end_at: float) -> None:
    started, finished, fatal = _turn_state(line, first_event)
    if not started:
        return
    number = started[-1]
    turn.server_turn, turn.split = number, len(started) - 1
    for event, at in zip(line.events[first_event:], line.times[first_event:], strict=True):
        if event.get("turn") != number:
            continue
        kind = event["type"]
        for stage, event_type in CLIENT_STAGES.items():
            if kind == event_type and stage not in turn.client_ms:
                turn.client_ms[stage] = round((at - speech_end_at) * 1000, 1)
        if kind == "input_audio_transcription.completed":
            turn.transcript = event.get("text")
        elif kind == "understanding":
            turn.intent, turn.path = event.get("intent"), event.get("path")
        elif kind == "response.done":
            turn.response_status = event.get("status")
        elif kind == "turn.metrics":
            turn.server_ms = {
                k.removeprefix("speech_end_to_"): v for k, v in event["latency_ms"].items()
            }
    if number in finished:
        turn.status = "ok"
    elif fatal:
        turn.status, turn.error = "error", fatal


async def run_bot_call(
    url: str,
    conversation: Conversation,
    record: CallRecord,
    options: BotOptions,
    rng: random.Random,
) -> CallRecord:
    """Put one scripted call through; ``record`` is filled in place (also when cancelled)."""
    record.turns = [
        TurnRecord(record.call, conversation.name, i, u.audio, u.intent)
        for i, u in enumerate(conversation.turns)
    ]
    began = time.monotonic()
    try:
        await _call(url, conversation, record, options, rng)
    except asyncio.CancelledError:
        record.settle("cancelled", "cancelled")
        raise
    except TimeoutError:
        record.settle("timeout", "timeout")
    except (OSError, ConnectionClosed, InvalidHandshake, InvalidURI) as exc:
        record.errors.append(type(exc).__name__)
        record.settle("dropped", "dropped")
    finally:
        record.duration_s = round(time.monotonic() - began, 3)
    return record


async def _call(
    url: str,
    conversation: Conversation,
    record: CallRecord,
    options: BotOptions,
    rng: random.Random,
) -> None:
    async with connect(
        url, max_size=2**22, compression=None, open_timeout=options.connect_timeout_s
    ) as ws:
        line = _Line(ws, record)
        reader = asyncio.create_task(line.receive())
        try:
            start = {
                "type": "session.start",
                "protocol": 1,
                "sample_rate": RATE,
                "codec": "pcm16",
                "customer_id": options.customer_id,
                "token": options.token,
            }
            await ws.send(orjson.dumps(start).decode())
            async with asyncio.timeout(options.connect_timeout_s):
                while not any(e["type"] in ("session.created", "error") for e in line.events):
                    line.changed.clear()
                    await line.changed.wait()
            if not any(e["type"] == "session.created" for e in line.events):
                record.settle("rejected", "rejected")  # server_busy, unauthorized, ...
                return
            line.began = time.monotonic()
            await line.silence(options.lead_silence_s)
            for turn, utterance in zip(record.turns, conversation.turns, strict=True):
                first_event = len(line.events)
                speech_end_at = await line.speak(utterance)
                deadline = speech_end_at + options.turn_timeout_s

                def done(first_event: int = first_event) -> bool:
                    started, finished, fatal = _turn_state(line, first_event)
                    return bool(fatal) or (bool(started) and started[-1] in finished)

                completed = await line.silence_until(done, deadline)
                _fill_turn(turn, line, first_event, speech_end_at)
                if not completed and turn.status == "pending":
                    turn.status = "timeout"
                if reader.done():
                    break
                await line.silence(rng.uniform(*options.think_s))
            await ws.send(orjson.dumps({"type": "session.end"}).decode())
            async with asyncio.timeout(options.end_timeout_s):
                await reader
            ended = any(e["type"] == "session.ended" for e in line.events)
            record.settle("dropped", "completed" if ended else "dropped")
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionClosed, Exception):
                await reader
