"""End to end: the real server in a child process, real sockets, real audio.

Each test puts calls through ``python -m agent serve`` exactly as a client would and
asserts on the events it gets back (transcripts by WER bound, not exact strings).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import numpy as np
import pytest

from agent.asr.wer import corpus_wer
from agent.asr.wer import word_error_rate as wer
from clients.call import run_call
from clients.local_server import PROJECT_ROOT, LocalServer
from protocol.codecs import resample
from tests.conftest import SPEECH, load_wav, speech_fixtures

pytestmark = pytest.mark.slow


def types(result) -> list[str]:
    return [e["type"] for e in result.events]


async def test_a_spoken_transfer_goes_through_every_stage(server: LocalServer) -> None:
    audio = load_wav(SPEECH / "transfer_01.wav")  # "send five thousand yen to Ken Sato"
    result = await run_call(server.url, audio=audio)
    kinds = types(result)
    assert kinds[0] == "session.created" and kinds[-1] == "session.ended"
    order = [
        "input_audio_buffer.speech_started",
        "input_audio_transcription.partial",
        "input_audio_buffer.speech_stopped",
        "input_audio_transcription.completed",
        "understanding",
        "response.text.delta",
        "response.done",
        "turn.metrics",
    ]
    positions = [kinds.index(kind) for kind in order]
    assert positions[1] < positions[3] and positions[3:] == sorted(positions[3:])
    final = result.first("input_audio_transcription.completed")[0]
    assert wer("send five thousand yen to Ken Sato", final["text"]) <= 0.2
    understanding = result.first("understanding")[0]
    assert understanding["intent"] == "transfer_money"
    assert understanding["entities"]["amount"] == {"minor": 5000, "currency": "JPY"}
    assert understanding["entities"]["recipient_candidates"][0]["id"] == "p-ken-sato"
    metrics = result.first("turn.metrics")[0]
    for stage in ("asr_final", "understanding_ready", "response_done"):
        assert metrics["latency_ms"][f"speech_end_to_{stage}"] >= 0
    summary = result.summary()
    assert 0 < summary["speech_end_to_final_transcript_ms"] < 5_000


async def test_concurrent_calls_transcribe_their_own_audio(server: LocalServer) -> None:
    chosen = [
        f
        for f in speech_fixtures()
        if f["audio"] in {"balance_01.wav", "transfer_02.wav", "card_lock_01.wav", "faq_01.wav"}
    ]
    results = await asyncio.gather(
        *(run_call(server.url, audio=load_wav(SPEECH / f["audio"]), fast=True) for f in chosen)
    )
    assert all(result.closed_cleanly for result in results)
    pairs = [
        (f["transcript"], r.summary()["transcript"]) for f, r in zip(chosen, results, strict=True)
    ]
    assert corpus_wer(pairs) <= 0.2, pairs
    # Each call got its own words back, not another call's.
    for reference, hypothesis in pairs:
        assert wer(reference, hypothesis) <= 0.5, (reference, hypothesis)


async def test_telephony_format_mulaw_8k(server: LocalServer) -> None:
    audio = resample(load_wav(SPEECH / "balance_01.wav"), 16_000, 8_000)
    result = await run_call(server.url, audio=audio, rate=8_000, codec="mulaw", fast=True)
    assert wer("what's my balance", result.summary()["transcript"]) <= 0.34
    assert result.first("understanding")[0]["intent"] == "check_balance"


async def test_a_real_recording_is_transcribed(server: LocalServer) -> None:
    audio = load_wav(SPEECH / "real" / "jfk.wav")
    result = await run_call(server.url, audio=audio, fast=True, timeout_s=120)
    reference = (
        "and so my fellow americans ask not what your country can do for you "
        "ask what you can do for your country"
    )
    assert wer(reference, result.summary()["transcript"]) <= 0.35


async def test_typed_text_skips_speech_recognition(server: LocalServer) -> None:
    result = await run_call(server.url, texts=("what's my balance",))
    assert result.first("input_audio_transcription.completed")[0]["source"] == "text"
    assert result.first("understanding")[0]["intent"] == "check_balance"
    assert result.first("response.done")[0]["status"] == "completed"


async def test_session_end_keeps_speech_that_had_no_trailing_silence(server: LocalServer) -> None:
    audio = load_wav(SPEECH / "card_lock_01.wav")
    result = await run_call(
        server.url, audio=audio[: int(1.05 * 16_000)], fast=True, tail_silence_s=0.0
    )
    assert result.closed_cleanly
    assert "input_audio_transcription.completed" in types(result)


async def test_health_and_metrics(server: LocalServer) -> None:
    await run_call(server.url, texts=("lock my card",))
    async with httpx.AsyncClient(base_url=server.http_url) as http:
        health = (await http.get("/healthz")).json()
        assert health["status"] == "ok" and health["active_calls"] == 0
        text = (await http.get("/metrics")).text
        assert "agent_stage_latency_seconds_bucket" in text
        assert 'agent_turns_total{input="text"}' in text
        assert 'agent_understanding_total{intent="lock_card",path="fast"}' in text
        assert (await http.get("/nope")).status_code == 404


def test_silence_only_call_has_no_turns(server: LocalServer) -> None:
    silence = np.zeros(16_000 * 2, dtype=np.int16)
    result = asyncio.run(run_call(server.url, audio=silence, fast=True))
    assert result.closed_cleanly and "input_audio_buffer.speech_started" not in types(result)


def test_the_readme_demo_puts_a_call_through() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "clients.demo"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "server listening at ws://127.0.0.1:" in done.stdout
    assert "final        : " in done.stdout
    assert "intent=transfer_money" in done.stdout
    assert "asr_final" in done.stdout and "call completed" in done.stdout
