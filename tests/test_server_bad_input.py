"""Bad input over a real socket: each gets a clear error (or close code), the server logs
it, and the other calls on the same server are unaffected."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import httpx
import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from agent.asr.wer import word_error_rate as wer
from clients.call import dev_token, run_call
from clients.local_server import LocalServer
from tests.conftest import SPEECH, load_wav

pytestmark = pytest.mark.slow

START = {
    "type": "session.start",
    "customer_id": "cust-001",
    "sample_rate": 16000,
    "token": dev_token("cust-001"),
}


async def next_event(ws: ClientConnection) -> dict:
    return orjson.loads(await asyncio.wait_for(ws.recv(), 10))


async def wait_for(ws: ClientConnection, kind: str) -> dict:
    async with asyncio.timeout(30):
        while (event := await next_event(ws)) and event["type"] != kind:
            pass
    return event


async def started(server: LocalServer) -> ClientConnection:
    ws = await connect(server.url)
    await ws.send(orjson.dumps(START).decode())
    assert (await next_event(ws))["type"] == "session.created"
    return ws


async def a_good_call_still_works(server: LocalServer) -> None:
    result = await run_call(server.url, audio=load_wav(SPEECH / "balance_01.wav"), fast=True)
    assert result.closed_cleanly
    assert wer("what's my balance", result.summary()["transcript"]) <= 0.34


async def test_errors_before_session_start(server: LocalServer) -> None:
    async with connect(server.url) as ws:
        await ws.send(b"\x00\x01" * 160)
        assert (await next_event(ws))["code"] == "session_not_started"
        await ws.send('{"type": "input_text", "text": "hi"}')
        assert (await next_event(ws))["code"] == "session_not_started"
        await ws.send(orjson.dumps({**START, "sample_rate": 11025}).decode())
        assert (await next_event(ws))["code"] == "unsupported_sample_rate"
        await ws.send(orjson.dumps(START).decode())  # and a correct start still works
        assert (await next_event(ws))["type"] == "session.created"
    assert any(r.get("code") == "session_not_started" for r in server.events("client_error"))


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("{oops", "invalid_json"),
        ('{"type": "dance"}', "unknown_event"),
        ('{"type": "input_text", "text": 5}', "invalid_event"),
        (orjson.dumps(START).decode(), "session_already_started"),
        (b"\x00" * 641, "invalid_audio_frame"),
        (b"\x00" * 70_000, "frame_too_large"),
    ],
)
async def test_bad_messages_get_an_error_and_the_call_goes_on(
    server: LocalServer, message: str | bytes, code: str
) -> None:
    async with await started(server) as ws:
        await ws.send(message)
        event = await next_event(ws)
        assert event == {"type": "error", "code": code, "message": event["message"]}
        assert event["message"]
        await ws.send('{"type": "input_text", "text": "what is my balance"}')
        assert (await wait_for(ws, "understanding"))["intent"] == "check_balance"


async def test_message_over_the_size_limit_closes_with_1009(server: LocalServer) -> None:
    async with await started(server) as ws:
        await ws.send(b"\x00" * (1_048_576 + 2))
        with pytest.raises(ConnectionClosed) as info:
            await wait_for(ws, "never")
        assert info.value.rcvd is not None and info.value.rcvd.code == 1009
    await a_good_call_still_works(server)


async def test_client_vanishing_mid_utterance_is_cleaned_up(server: LocalServer) -> None:
    audio = load_wav(SPEECH / "transfer_02.wav")
    ws = await started(server)
    for i in range(0, 16_000, 320):
        await ws.send(audio[i : i + 320].tobytes())
    await wait_for(ws, "input_audio_buffer.speech_started")
    ws.transport.abort()  # no close frame: the caller's phone died
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        for _ in range(100):
            if (await http.get("/healthz")).json()["active_calls"] == 0:
                break
            await asyncio.sleep(0.1)
        assert (await http.get("/healthz")).json()["active_calls"] == 0
    assert any(r.get("reason") == "disconnected" for r in server.events("call_ended"))
    await a_good_call_still_works(server)


async def test_client_that_stops_reading_is_cut_off() -> None:
    """A client that sends but never reads: its events pile up until the server drops it,
    while another call on the same server completes."""
    with LocalServer("--server.outbox_events", "8") as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        ws = await connect(server.url, sock=sock, max_queue=1)
        await ws.send(orjson.dumps(START).decode())
        text = orjson.dumps({"type": "input_text", "text": "pay ken sato fifty pounds " * 70})
        good_call = asyncio.create_task(a_good_call_still_works(server))
        deadline = time.monotonic() + 60
        with contextlib.suppress(ConnectionClosed, OSError):
            while time.monotonic() < deadline and not server.events("client_not_reading"):
                await asyncio.wait_for(ws.send(text.decode()), 5)
        assert server.events("client_not_reading"), "the server never noticed"
        await good_call
        ws.transport.abort()


async def test_busy_server_refuses_with_a_clear_error() -> None:
    with LocalServer("--server.max_calls", "1") as server:
        async with await started(server):
            async with connect(server.url) as second:
                event = await next_event(second)
                assert event["code"] == "server_busy"
                with pytest.raises(ConnectionClosed) as info:
                    await second.recv()
                assert info.value.rcvd is not None and info.value.rcvd.code == 1013


async def test_no_session_start_times_out() -> None:
    with LocalServer("--server.session_start_timeout_s", "0.5") as server:
        async with connect(server.url) as ws:
            assert (await next_event(ws))["code"] == "session_not_started"
            with pytest.raises(ConnectionClosed) as info:
                await ws.recv()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1008
