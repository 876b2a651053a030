import base64

import orjson
import pytest

from protocol.telephony import (
    Dtmf,
    MarkEcho,
    Media,
    MediaReorderer,
    Start,
    Stop,
    TelephonyError,
    clear_message,
    mark_message,
    media_message,
    parse_message,
)


def media(seq: int, fill: int = 0, ms: int = 20) -> Media:
    return Media(seq, (seq - 1) * 20, bytes([fill]) * (ms * 8))


def test_parses_a_twilio_session() -> None:
    start = parse_message(
        orjson.dumps(
            {
                "event": "start",
                "sequenceNumber": "1",
                "streamSid": "MZ1",
                "start": {
                    "streamSid": "MZ1",
                    "callSid": "CA1",
                    "tracks": ["inbound"],
                    "customParameters": {"token": "abc"},
                    "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
                },
            }
        )
    )
    assert start == Start("MZ1", "CA1", "audio/x-mulaw", 8000, {"token": "abc"})
    payload = base64.b64encode(b"\xff" * 160).decode()
    assert parse_message(
        orjson.dumps(
            {
                "event": "media",
                "sequenceNumber": "3",
                "streamSid": "MZ1",
                "media": {"track": "inbound", "chunk": "1", "timestamp": "5", "payload": payload},
            }
        )
    ) == Media(3, 5, b"\xff" * 160)
    assert parse_message(
        '{"event": "dtmf", "sequenceNumber": "4", "dtmf": {"track": "inbound_track", "digit": "7"}}'
    ) == Dtmf(4, "7")
    assert parse_message('{"event": "mark", "mark": {"name": "t1-p0"}}') == MarkEcho("t1-p0")
    assert parse_message('{"event": "stop", "stop": {}}') == Stop()


@pytest.mark.parametrize(
    "message",
    [
        "nope",
        "[]",
        '{"event": "media", "sequenceNumber": "1", "media": {"payload": "%%%"}}',
        '{"event": "media"}',
        '{"event": "dtmf", "dtmf": {"digit": "x"}}',
        '{"event": "bogus"}',
        '{"event": "media", "sequenceNumber": "one", "media": {"payload": ""}}',
    ],
)
def test_bad_messages_raise_a_clear_error(message: str) -> None:
    with pytest.raises(TelephonyError):
        parse_message(message)


def test_outbound_messages() -> None:
    assert orjson.loads(media_message("MZ", b"\x00\x01")) == {
        "event": "media",
        "streamSid": "MZ",
        "media": {"payload": "AAE="},
    }
    assert orjson.loads(mark_message("MZ", "t1")) == {
        "event": "mark",
        "streamSid": "MZ",
        "mark": {"name": "t1"},
    }
    assert orjson.loads(clear_message("MZ")) == {"event": "clear", "streamSid": "MZ"}


def test_reorders_and_drops_duplicates() -> None:
    r = MediaReorderer(depth=4)
    out = r.push(media(1, 1)) + r.push(media(3, 3)) + r.push(media(2, 2))
    out += r.push(media(2, 2)) + r.push(media(1, 1))  # duplicates
    out += r.flush()
    assert [chunk[0] for chunk in out] == [1, 2, 3]
    assert r.dropped == 2 and r.filled_ms == 0


def test_a_lost_message_becomes_silence_of_its_length() -> None:
    r = MediaReorderer(depth=2)
    out = []
    for seq in (1, 2, 4, 5, 6):  # 3 never arrives
        out += r.push(media(seq, seq))
    out += r.flush()
    assert b"".join(out) == (
        b"\x01" * 160
        + b"\x02" * 160
        + b"\xff" * 160
        + b"\x04" * 160
        + b"\x05" * 160
        + b"\x06" * 160
    )
    assert r.filled_ms == 20
    assert r.push(media(3, 3)) == []  # too late now: its place was filled


def test_silence_gap_in_timestamps_is_kept() -> None:
    r = MediaReorderer(depth=1)
    first = Media(1, 0, b"\x01" * 160)
    after_pause = Media(2, 500, b"\x02" * 160)  # the carrier sent nothing for 480 ms
    out = r.push(first) + r.push(after_pause) + r.flush()
    assert b"".join(out) == b"\x01" * 160 + b"\xff" * (480 * 8) + b"\x02" * 160
