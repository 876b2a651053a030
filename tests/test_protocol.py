import orjson
import pytest

from protocol import events
from protocol.events import ErrorCode, ProtocolError, parse_client_event


def parse(event: object) -> events.ClientEvent:
    return parse_client_event(orjson.dumps(event))


def error_code(message: str | bytes) -> ErrorCode:
    with pytest.raises(ProtocolError) as info:
        parse_client_event(message)
    return info.value.code


def test_session_start_with_defaults() -> None:
    event = parse({"type": "session.start", "customer_id": "cust-001"})
    assert event == events.SessionStart(16_000, "pcm16", "cust-001", None)


def test_session_start_full() -> None:
    event = parse(
        {
            "type": "session.start",
            "protocol": 1,
            "sample_rate": 8000,
            "codec": "mulaw",
            "customer_id": "c",
            "token": "t",
        }
    )
    assert event == events.SessionStart(8_000, "mulaw", "c", "t")


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("{not json", ErrorCode.INVALID_JSON),
        ("[1, 2]", ErrorCode.INVALID_EVENT),
        ('{"no_type": 1}', ErrorCode.INVALID_EVENT),
        ('{"type": "dance"}', ErrorCode.UNKNOWN_EVENT),
        ('{"type": "session.start"}', ErrorCode.INVALID_EVENT),
        ('{"type": "session.start", "customer_id": ""}', ErrorCode.INVALID_EVENT),
        ('{"type": "session.start", "customer_id": 7}', ErrorCode.INVALID_EVENT),
        (
            '{"type": "session.start", "customer_id": "c", "sample_rate": 11025}',
            ErrorCode.UNSUPPORTED_SAMPLE_RATE,
        ),
        (
            '{"type": "session.start", "customer_id": "c", "sample_rate": true}',
            ErrorCode.INVALID_EVENT,
        ),
        (
            '{"type": "session.start", "customer_id": "c", "codec": "opus"}',
            ErrorCode.UNSUPPORTED_CODEC,
        ),
        (
            '{"type": "session.start", "customer_id": "c", "protocol": 2}',
            ErrorCode.UNSUPPORTED_PROTOCOL,
        ),
        ('{"type": "input_text", "text": "   "}', ErrorCode.INVALID_EVENT),
        ('{"type": "input_text"}', ErrorCode.INVALID_EVENT),
    ],
)
def test_bad_events_get_stable_codes(message: str, code: ErrorCode) -> None:
    assert error_code(message) == code


def test_overlong_text_is_refused() -> None:
    message = orjson.dumps({"type": "input_text", "text": "a" * (events.MAX_TEXT_CHARS + 1)})
    assert error_code(message) == ErrorCode.INVALID_EVENT


def test_server_events_have_documented_types() -> None:
    assert events.speech_stopped_event(2, 16_000) == {
        "type": "input_audio_buffer.speech_stopped",
        "turn": 2,
        "audio_end_ms": 1000,
    }
    assert events.transcript_event(1, "hi", final=True, source="x")["type"] == (
        "input_audio_transcription.completed"
    )
    assert orjson.loads(events.encode(events.error_event(ErrorCode.SERVER_BUSY, "m"))) == {
        "type": "error",
        "code": "server_busy",
        "message": "m",
    }


OFFER_SDP = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"


def test_webrtc_offer() -> None:
    event = parse({"type": "webrtc.offer", "sdp": OFFER_SDP})
    assert event == events.WebRTCOffer(OFFER_SDP)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "webrtc.offer"},
        {"type": "webrtc.offer", "sdp": 5},
        {"type": "webrtc.offer", "sdp": "hello"},
        {"type": "webrtc.offer", "sdp": "v=0\r\n" + "a" * events.MAX_SDP_CHARS},
    ],
)
def test_bad_webrtc_offers_are_invalid_events(event: dict) -> None:
    assert error_code(orjson.dumps(event)) == ErrorCode.INVALID_EVENT


def test_webrtc_answer_event() -> None:
    assert events.webrtc_answer_event(OFFER_SDP) == {"type": "webrtc.answer", "sdp": OFFER_SDP}
    assert events.ErrorCode.WEBRTC_FAILED == "webrtc_failed"
