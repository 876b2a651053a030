"""Wire protocol, version 1: JSON text events and binary audio frames.

Sans-I/O: :func:`parse_client_event` turns one text message into a typed event or raises
:class:`ProtocolError` with a stable code; the ``*_event`` builders return the dicts the
server sends. Event names follow OpenAI Realtime where the concept is the same
(``session.created``, ``input_audio_buffer.speech_started``, ``response.text.delta``,
``response.done``, ``response.cancel``, ``error``). See protocol/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

PROTOCOL_VERSION = 1
SUPPORTED_SAMPLE_RATES = (8_000, 16_000, 24_000, 32_000, 44_100, 48_000)
SUPPORTED_CODECS = ("pcm16", "mulaw")
MAX_TEXT_CHARS = 2_000
MAX_SDP_CHARS = 65_536  # a browser's audio-only offer is 2-6 KB


class ErrorCode(StrEnum):
    """Stable error codes. Clients may switch on these; never rename one."""

    INVALID_JSON = "invalid_json"
    UNKNOWN_EVENT = "unknown_event"
    INVALID_EVENT = "invalid_event"
    UNSUPPORTED_PROTOCOL = "unsupported_protocol"
    UNSUPPORTED_SAMPLE_RATE = "unsupported_sample_rate"
    UNSUPPORTED_CODEC = "unsupported_codec"
    SESSION_NOT_STARTED = "session_not_started"
    SESSION_ALREADY_STARTED = "session_already_started"
    INVALID_AUDIO_FRAME = "invalid_audio_frame"
    FRAME_TOO_LARGE = "frame_too_large"
    AUDIO_OVERFLOW = "audio_overflow"
    SLOW_CONSUMER = "slow_consumer"
    SERVER_BUSY = "server_busy"
    UNAUTHORIZED = "unauthorized"
    ASR_UNAVAILABLE = "asr_unavailable"
    WEBRTC_FAILED = "webrtc_failed"
    INTERNAL_ERROR = "internal_error"


class ProtocolError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- Client -> server ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionStart:
    sample_rate: int
    codec: str
    customer_id: str
    token: str | None


@dataclass(frozen=True, slots=True)
class InputText:
    """Typed text standing in for a spoken turn (testing, accessibility)."""

    text: str


@dataclass(frozen=True, slots=True)
class ResponseCancel:
    pass


@dataclass(frozen=True, slots=True)
class SessionEnd:
    pass


@dataclass(frozen=True, slots=True)
class WebRTCOffer:
    """The browser's SDP offer: the call's audio moves to a WebRTC peer connection."""

    sdp: str


ClientEvent = SessionStart | InputText | ResponseCancel | SessionEnd | WebRTCOffer


def _field(event: dict[str, Any], name: str, kind: type, default: Any = ...) -> Any:
    value = event.get(name, default)
    if value is ...:
        raise ProtocolError(ErrorCode.INVALID_EVENT, f"{event['type']}: missing field {name!r}")
    # bool is an int subclass; a sample rate of `true` is still invalid.
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise ProtocolError(
            ErrorCode.INVALID_EVENT,
            f"{event['type']}: field {name!r} must be {kind.__name__}",
        )
    return value


def _session_start(event: dict[str, Any]) -> SessionStart:
    version = _field(event, "protocol", int, PROTOCOL_VERSION)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_PROTOCOL,
            f"protocol version {version} is not supported; this server speaks {PROTOCOL_VERSION}",
        )
    rate = _field(event, "sample_rate", int, 16_000)
    if rate not in SUPPORTED_SAMPLE_RATES:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_SAMPLE_RATE,
            f"sample_rate {rate} is not supported; use one of {list(SUPPORTED_SAMPLE_RATES)}",
        )
    codec = _field(event, "codec", str, "pcm16")
    if codec not in SUPPORTED_CODECS:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_CODEC,
            f"codec {codec!r} is not supported; use one of {list(SUPPORTED_CODECS)}",
        )
    customer_id = _field(event, "customer_id", str)
    if not customer_id:
        raise ProtocolError(ErrorCode.INVALID_EVENT, "session.start: customer_id is empty")
    return SessionStart(rate, codec, customer_id, _field(event, "token", str, None))


def _input_text(event: dict[str, Any]) -> InputText:
    text = _field(event, "text", str)
    if not text.strip():
        raise ProtocolError(ErrorCode.INVALID_EVENT, "input_text: text is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise ProtocolError(
            ErrorCode.INVALID_EVENT, f"input_text: text is over {MAX_TEXT_CHARS} characters"
        )
    return InputText(text)


def _webrtc_offer(event: dict[str, Any]) -> WebRTCOffer:
    sdp = _field(event, "sdp", str)
    if not sdp.startswith("v=0"):
        raise ProtocolError(ErrorCode.INVALID_EVENT, "webrtc.offer: sdp is not an SDP offer")
    if len(sdp) > MAX_SDP_CHARS:
        raise ProtocolError(
            ErrorCode.INVALID_EVENT, f"webrtc.offer: sdp is over {MAX_SDP_CHARS} characters"
        )
    return WebRTCOffer(sdp)


_PARSERS = {
    "session.start": _session_start,
    "input_text": _input_text,
    "response.cancel": lambda _event: ResponseCancel(),
    "session.end": lambda _event: SessionEnd(),
    "webrtc.offer": _webrtc_offer,
}

CLIENT_EVENT_TYPES = tuple(_PARSERS)


def parse_client_event(message: str | bytes) -> ClientEvent:
    """One text message -> a typed client event, or ProtocolError with a stable code."""
    try:
        event = orjson.loads(message)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"message is not valid JSON: {exc}") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise ProtocolError(ErrorCode.INVALID_EVENT, "an event is a JSON object with a 'type'")
    parser = _PARSERS.get(event["type"])
    if parser is None:
        raise ProtocolError(
            ErrorCode.UNKNOWN_EVENT,
            f"unknown event type {event['type']!r}; expected one of {list(CLIENT_EVENT_TYPES)}",
        )
    return parser(event)


# --- Server -> client ---------------------------------------------------------------------


def encode(event: dict[str, Any]) -> bytes:
    return orjson.dumps(event)


def samples_to_ms(samples: int, rate: int = 16_000) -> int:
    return samples * 1000 // rate


def session_created_event(session_id: str, *, sample_rate: int, codec: str) -> dict[str, Any]:
    return {
        "type": "session.created",
        "session_id": session_id,
        "protocol": PROTOCOL_VERSION,
        "input_audio": {"sample_rate": sample_rate, "codec": codec, "channels": 1},
    }


def speech_started_event(turn: int, start_sample: int) -> dict[str, Any]:
    return {
        "type": "input_audio_buffer.speech_started",
        "turn": turn,
        "audio_start_ms": samples_to_ms(start_sample),
    }


def speech_stopped_event(turn: int, end_sample: int) -> dict[str, Any]:
    return {
        "type": "input_audio_buffer.speech_stopped",
        "turn": turn,
        "audio_end_ms": samples_to_ms(end_sample),
    }


def transcript_event(turn: int, text: str, *, final: bool, source: str) -> dict[str, Any]:
    kind = "completed" if final else "partial"
    return {
        "type": f"input_audio_transcription.{kind}",
        "turn": turn,
        "text": text,
        "source": source,
    }


def understanding_event(turn: int, understanding: dict[str, Any]) -> dict[str, Any]:
    return {"type": "understanding", "turn": turn, **understanding}


def response_delta_event(turn: int, delta: str) -> dict[str, Any]:
    return {"type": "response.text.delta", "turn": turn, "delta": delta}


def response_done_event(turn: int, text: str, *, status: str = "completed") -> dict[str, Any]:
    return {"type": "response.done", "turn": turn, "text": text, "status": status}


def turn_metrics_event(
    turn: int, stages_ms: dict[str, float], latencies_ms: dict[str, float]
) -> dict[str, Any]:
    return {
        "type": "turn.metrics",
        "turn": turn,
        "stages_ms": stages_ms,
        "latency_ms": latencies_ms,
    }


def error_event(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"type": "error", "code": str(code), "message": message}


def webrtc_answer_event(sdp: str) -> dict[str, Any]:
    return {"type": "webrtc.answer", "sdp": sdp}


def session_ended_event(reason: str) -> dict[str, Any]:
    return {"type": "session.ended", "reason": reason}
