"""Telephony media streams over WebSocket, Twilio Media Streams compatible. Sans-I/O.

Inbound messages (JSON text): ``connected``, ``start`` (stream and call ids, media format,
custom parameters), ``media`` (base64 G.711 mu-law at 8 kHz, 20 ms per message, with a
sequence number and a timestamp in ms), ``dtmf``, ``mark`` (the echo of a mark we sent,
once the audio before it has played) and ``stop``. Outbound: ``media``, ``mark`` and
``clear`` (drop the audio queued for playback: barge-in).

:class:`MediaReorderer` puts media back in order by sequence number, drops duplicates, and
fills gaps with silence so the pipeline's timeline matches the caller's.
"""

from __future__ import annotations

import base64
import binascii
import heapq
from dataclasses import dataclass, field
from typing import Any

import orjson

MULAW_RATE = 8_000
MULAW_SILENCE = b"\xff"
FRAME_MS = 20


class TelephonyError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Connected:
    protocol: str


@dataclass(frozen=True, slots=True)
class Start:
    stream_sid: str
    call_sid: str
    encoding: str
    sample_rate: int
    custom_parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Media:
    sequence: int
    timestamp_ms: int
    payload: bytes  # mu-law bytes


@dataclass(frozen=True, slots=True)
class Dtmf:
    sequence: int
    digit: str


@dataclass(frozen=True, slots=True)
class MarkEcho:
    name: str


@dataclass(frozen=True, slots=True)
class Stop:
    pass


TelephonyEvent = Connected | Start | Media | Dtmf | MarkEcho | Stop


def _int(value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise TelephonyError(f"{what} must be an integer, got {value!r}") from None


def parse_message(message: str | bytes) -> TelephonyEvent | None:
    """One inbound message -> event; None for events we do not use. Raises TelephonyError."""
    try:
        data = orjson.loads(message)
    except orjson.JSONDecodeError as exc:
        raise TelephonyError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TelephonyError("a message is a JSON object with an 'event'")
    kind = data.get("event")
    try:
        if kind == "connected":
            return Connected(str(data.get("protocol", "")))
        if kind == "start":
            start = data["start"]
            media_format = start.get("mediaFormat", {})
            return Start(
                stream_sid=str(data.get("streamSid") or start["streamSid"]),
                call_sid=str(start.get("callSid", "")),
                encoding=str(media_format.get("encoding", "audio/x-mulaw")),
                sample_rate=_int(media_format.get("sampleRate", MULAW_RATE), "sampleRate"),
                custom_parameters={
                    str(k): str(v) for k, v in (start.get("customParameters") or {}).items()
                },
            )
        if kind == "media":
            media = data["media"]
            if media.get("track", "inbound") not in ("inbound", "inbound_track"):
                return None
            return Media(
                sequence=_int(data["sequenceNumber"], "sequenceNumber"),
                timestamp_ms=_int(media.get("timestamp", 0), "timestamp"),
                payload=base64.b64decode(media["payload"], validate=True),
            )
        if kind == "dtmf":
            digit = str(data["dtmf"]["digit"])
            if digit not in "0123456789*#" or len(digit) != 1:
                raise TelephonyError(f"unknown DTMF digit {digit!r}")
            return Dtmf(_int(data.get("sequenceNumber", 0), "sequenceNumber"), digit)
        if kind == "mark":
            return MarkEcho(str(data["mark"]["name"]))
        if kind == "stop":
            return Stop()
    except (KeyError, TypeError, AttributeError) as exc:
        raise TelephonyError(f"{kind} message is missing {exc}") from None
    except binascii.Error as exc:
        raise TelephonyError(f"media payload is not base64: {exc}") from None
    raise TelephonyError(f"unknown event {kind!r}")


def media_message(stream_sid: str, mulaw: bytes) -> str:
    payload = base64.b64encode(mulaw).decode()
    return orjson.dumps(
        {"event": "media", "streamSid": stream_sid, "media": {"payload": payload}}
    ).decode()


def mark_message(stream_sid: str, name: str) -> str:
    return orjson.dumps({"event": "mark", "streamSid": stream_sid, "mark": {"name": name}}).decode()


def clear_message(stream_sid: str) -> str:
    return orjson.dumps({"event": "clear", "streamSid": stream_sid}).decode()


class MediaReorderer:
    """Media in by arrival, mu-law out in sequence order, gaps filled with silence.

    Holds up to ``depth`` messages to wait for a late one; a message older than what was
    already released, or seen before, is dropped. When the oldest missing message has
    not come within ``depth`` later ones, the gap is filled with silence as long as the
    timestamps say it lasted; so is a jump in the timestamps of messages in order (a
    carrier that suppresses silence), keeping the pipeline's timeline the caller's.
    """

    def __init__(self, depth: int = 4) -> None:
        self.depth = depth
        self._heap: list[tuple[int, int, bytes]] = []
        self._held: set[int] = set()
        self._next: int | None = None  # next sequence number to release
        self._released_until_ms: int | None = None  # timestamp where released audio ends
        self.dropped = 0
        self.filled_ms = 0

    def push(self, media: Media) -> list[bytes]:
        if media.sequence in self._held or (self._next is not None and media.sequence < self._next):
            self.dropped += 1  # a duplicate, or too late: its place was already filled
            return []
        heapq.heappush(self._heap, (media.sequence, media.timestamp_ms, media.payload))
        self._held.add(media.sequence)
        return self._release(flush=False)

    def flush(self) -> list[bytes]:
        return self._release(flush=True)

    def _release(self, *, flush: bool) -> list[bytes]:
        out: list[bytes] = []
        while self._heap:
            sequence, timestamp, payload = self._heap[0]
            in_order = self._next is None or sequence == self._next
            if not (in_order or flush or len(self._heap) > self.depth):
                break
            heapq.heappop(self._heap)
            self._held.discard(sequence)
            if self._released_until_ms is not None:
                gap_ms = timestamp - self._released_until_ms
                if gap_ms > 0:
                    self.filled_ms += gap_ms
                    out.append(MULAW_SILENCE * (gap_ms * MULAW_RATE // 1000))
            out.append(payload)
            self._next = sequence + 1
            self._released_until_ms = timestamp + len(payload) * 1000 // MULAW_RATE
        return out
