"""The browser call widget: the real page in headless Chromium talks to the real server
over WebRTC, with a speech fixture as the microphone; we read what the page shows.

Chromium and the server run inside a network namespace of their own with only the
loopback interface (``unshare -n``), so every packet, WebRTC included, stays on
127.0.0.1 there. The browser session itself is tests/widget_session.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import orjson
import pytest
from websockets.asyncio.client import connect

from agent import auth
from agent.transports.webrtc import FRAME_SAMPLES, RATE, ReplyTrack, TrackSink, mono_int16
from clients.local_server import LocalServer
from tests.conftest import SPEECH

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "widget"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def _namespace_command() -> list[str]:
    """A new network namespace (the session brings its lo up). Root makes a plain one;
    anyone else maps themselves to root in a user namespace first (unshare -r)."""
    return ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-r", "-n"]


needs_browser = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Chromium and chromedriver (Debian: apt-get install chromium chromium-driver)",
)


def browser_call(artifacts: Path, *args: str) -> dict:
    """Run tests/widget_session.py in a fresh network namespace; what the page showed."""
    pytest.importorskip("selenium", reason="needs selenium (pip install selenium)")
    command = [
        *_namespace_command(),
        sys.executable,
        str(ROOT / "tests" / "widget_session.py"),
        "--artifacts",
        str(artifacts),
        "--chromium",
        str(CHROMIUM),
        "--chromedriver",
        str(CHROMEDRIVER),
        *args,
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=150)
    lines = done.stdout.strip().splitlines()
    assert lines, f"no result from the browser session:\n{done.stderr[-4000:]}"
    page = orjson.loads(lines[-1])
    assert "failure" not in page, (page, done.stderr[-4000:])
    return page


@pytest.mark.slow
@needs_browser
def test_a_browser_call_over_webrtc() -> None:
    page = browser_call(ARTIFACTS, "--wav", str(SPEECH / "transfer_01.wav"), "--confirm")

    # What the page shows for the spoken turn: transcript, understanding, reply.
    first = page["turns"]["1"]
    assert "ken sato" in first["transcript"].lower(), first
    assert first["intent"].startswith("transfer_money"), first
    assert any(e.startswith("amount:") and "5,000" in e for e in first["entities"]), first
    assert first["state"] == "done" and "Ken Sato" in first["reply"], first
    assert first["latency"].endswith("ms"), first
    assert page["confirm_pending"], "the page did not ask for a confirmation"
    # Confirm is a typed "yes": the transfer goes through.
    second = page["turns"]["2"]
    assert second["transcript"] == "yes" and second["intent"].startswith("confirm"), second
    assert second["reply"].startswith("Done"), second

    # The audio really went both ways over WebRTC.
    assert "connected" in page["webrtc_states"], page
    assert page["webrtc_audio_frames"] and page["webrtc_audio_frames"][0] > 200, page
    audio = page["audio"]
    assert audio and audio["packets"] > 50 and audio["energy"] > 0, audio  # the spoken reply
    assert page["error"] == "" and page["status_after_hangup"] == "Call ended.", page
    assert (ARTIFACTS / "widget.png").stat().st_size > 10_000


@pytest.mark.slow
@needs_browser
def test_talking_over_the_reply_stops_it() -> None:
    # The balance reply is several seconds of speech; the caller speaks 2.5 s after
    # finishing the question, while it plays. Chromium's echo canceller muffles a caller
    # who talks over the reply (it cannot know the fake microphone hears no speaker),
    # so this caller wears headphones: the page's Echo cancellation box is unticked.
    page = browser_call(
        ARTIFACTS.with_name("widget-barge-in"),
        *("--wav", str(SPEECH / "balance_01.wav")),
        *("--wav", str(SPEECH / "cancel_01.wav")),
        *("--gap-s", "2.5", "--headphones"),
    )
    assert page["turns"]["1"]["intent"].startswith("check_balance"), page
    assert [i["turn"] for i in page["interrupted"]] == [1], page  # the speaker cut turn 1
    # The interruption is a turn of its own. Its words are not asserted: speech that
    # overlaps the reply is heard less reliably ("cancel that" came back once as
    # "ken sato that"); the cut reply is what this test is about.
    second = page["turns"]["2"]
    assert second["transcript"] and second["reply"], second


# --- the page and the token, over plain HTTP ---------------------------------------------


@pytest.mark.slow
async def test_the_widget_is_served_and_nothing_else(server: LocalServer) -> None:
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        page = await http.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'id="call"' in page.text and "/web/app.js" in page.text
        script = await http.get("/web/app.js")
        assert script.headers["content-type"].startswith("text/javascript")
        assert (await http.get("/web/style.css")).headers["content-type"].startswith("text/css")
        for path in ("/web/missing.js", "/web/%2e%2e%2fREADME.md", "/index.html", "/web/"):
            assert (await http.get(path)).status_code == 404, path
    # httpx would normalise "..": send the path as written.
    for path in ("/web/../README.md", "/web/../../etc/passwd", "/web/.hidden.js"):
        assert await raw_status(server.port, path) == 404, path


async def raw_status(port: int, path: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    status = await reader.readline()
    writer.close()
    return int(status.split()[1])


@pytest.mark.slow
async def test_dev_tokens_for_known_customers_only(server: LocalServer) -> None:
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        answer = await http.get("/dev/token", params={"customer": "cust-001"})
        assert answer.status_code == 200
        token = answer.json()["token"]
        assert auth.verify(token, "dev-only-secret-replace-me").customer_id == "cust-001"
        assert (await http.get("/dev/token", params={"customer": "nobody"})).status_code == 404


@pytest.mark.slow
async def test_dev_tokens_are_off_unless_configured() -> None:
    with LocalServer("--auth.dev_tokens", "false") as server:
        async with httpx.AsyncClient(base_url=server.http_url) as http:
            answer = await http.get("/dev/token", params={"customer": "cust-001"})
            assert answer.status_code == 404


@pytest.mark.slow
async def test_an_offer_the_server_cannot_answer_leaves_the_call_going(
    server: LocalServer,
) -> None:
    token = auth.mint("cust-001", "dev-only-secret-replace-me", ttl_s=60)
    no_ice = (
        "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
        "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:111 opus/48000/2\r\n"
    )
    no_audio = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
    async with connect(server.url) as ws:
        start = {"type": "session.start", "sample_rate": 48_000, "customer_id": "cust-001"}
        await ws.send(orjson.dumps({**start, "token": token}).decode())
        assert orjson.loads(await ws.recv())["type"] == "session.created"
        for sdp in (no_ice, no_audio):
            await ws.send(orjson.dumps({"type": "webrtc.offer", "sdp": sdp}).decode())
            error = orjson.loads(await ws.recv())
            assert error["type"] == "error" and error["code"] == "webrtc_failed", error
        await ws.send(orjson.dumps({"type": "input_text", "text": "what's my balance"}).decode())
        assert orjson.loads(await ws.recv())["type"] == "input_audio_transcription.completed"
    async with connect(server.url) as ws:  # WebRTC audio is fed to the call as PCM16
        start = {**start, "codec": "mulaw", "sample_rate": 8000, "token": token}
        await ws.send(orjson.dumps(start).decode())
        assert orjson.loads(await ws.recv())["type"] == "session.created"
        await ws.send(orjson.dumps({"type": "webrtc.offer", "sdp": no_ice}).decode())
        assert orjson.loads(await ws.recv())["code"] == "invalid_event"


# --- the reply track, without a network ---------------------------------------------------


async def test_reply_track_plays_queued_audio_then_silence_and_reports_marks() -> None:
    track = ReplyTrack()
    heard: list[str] = []
    track.on_mark = heard.append
    sink = TrackSink(track)
    tone = (np.sin(np.arange(3200) / 5) * 8000).astype("<i2")  # 200 ms at 16 kHz
    await sink.play(tone.tobytes())
    await sink.mark("t1-p0")
    frames = [await track.recv() for _ in range(12)]  # 240 ms
    loud = [int(np.abs(f.to_ndarray()).max()) > 1000 for f in frames]
    assert loud[:9] == [True] * 9 and loud[-1] is False  # 200 ms of tone, then silence
    assert heard == ["t1-p0"]
    assert all(f.sample_rate == RATE and f.samples == FRAME_SAMPLES for f in frames)
    assert frames[1].pts - frames[0].pts == FRAME_SAMPLES


async def test_barge_in_clears_the_queued_reply_at_once() -> None:
    track = ReplyTrack()
    heard: list[str] = []
    track.on_mark = heard.append
    sink = TrackSink(track)
    await sink.play((np.full(16_000, 6000, "<i2")).tobytes())  # one second queued
    await sink.mark("t1-p0")
    assert int(np.abs((await track.recv()).to_ndarray()).max()) > 1000
    await sink.clear()
    after = await track.recv()
    assert not after.to_ndarray().any() and heard == []  # silence; the phrase was not heard


async def test_reply_queue_is_bounded_when_nobody_reads_the_track() -> None:
    track = ReplyTrack()
    sink = TrackSink(track)
    second = np.zeros(16_000, "<i2").tobytes()
    for _ in range(15):
        await sink.play(second)
    assert track.queued_s == pytest.approx(10, abs=0.01)  # the newest 10 s are kept
    assert track.dropped_s == pytest.approx(5, abs=0.05)
    track.stop()
    await asyncio.sleep(0)


def test_stereo_frames_are_downmixed_to_mono() -> None:
    import av

    frame = av.AudioFrame(format="s16", layout="stereo", samples=4)
    frame.planes[0].update(np.array([100, 300, -50, -150, 0, 0, 7, 9], "<i2").tobytes())
    frame.sample_rate = RATE
    assert mono_int16(frame).tolist() == [200, -100, 0, 8]
