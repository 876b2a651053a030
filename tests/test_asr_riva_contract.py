"""Contract test of the Riva ASR backend against a stand-in Riva server.

Riva itself needs an NVIDIA GPU (it serves Triton/TensorRT models), so it cannot run on
CI. This is therefore a *contract* test: a real ``grpc.aio`` server on 127.0.0.1 speaks
Riva's real wire protocol, implementing ``RivaSpeechRecognitionServicer`` from the
generated protos shipped in ``nvidia-riva-client``. It checks what our client sends (the
first request's config, boosted phrases, metadata, every audio byte) and answers as Riva
does: interim results while audio arrives, ``is_final`` results with word times in
milliseconds from the start of the stream's audio, then closes the stream after the
client half-closes. The transcript is scripted per test, and revealed in step with the
audio the server has actually received. Failures (aborted streams, hangs) are injected
to test reconnect, errors, deadlines and cancellation.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from riva.client.proto import riva_asr_pb2, riva_asr_pb2_grpc, riva_audio_pb2

from agent.asr.base import SAMPLE_RATE, ASRError, CallContext, Hypothesis, UtteranceStream
from agent.asr.riva import RivaEndpointing, RivaRecognizer

pytestmark = pytest.mark.timeout(30)

_MS = SAMPLE_RATE // 1000  # samples per millisecond
_BYTES_PER_MS = _MS * 2

# "send five thousand yen to ken sato": (word, start_ms, end_ms) in the stream's audio.
WORDS = (
    ("send", 100, 300),
    ("five", 300, 500),
    ("thousand", 500, 800),
    ("yen", 800, 900),
    ("to", 900, 1000),
    ("ken", 1000, 1100),
    ("sato", 1100, 1200),
)
TEXT = " ".join(w for w, _, _ in WORDS)
UTTERANCE_MS = 1300
CALL_OFFSET = 3 * SAMPLE_RATE  # the utterance starts 3 s into the call


# -- the stand-in Riva server ----------------------------------------------------------


@dataclass
class StreamRecord:
    """What the fake saw on one StreamingRecognize RPC."""

    metadata: dict[str, str] = field(default_factory=dict)
    config: riva_asr_pb2.StreamingRecognitionConfig | None = None
    audio_bytes: int = 0
    audio_requests: int = 0
    audio_seen: asyncio.Event = field(default_factory=asyncio.Event)
    half_closed: bool = False
    cancelled: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Script:
    words: tuple[tuple[str, int, int], ...] = WORDS
    # Word counts after which Riva's own endpointer emits an is_final result mid-stream.
    final_splits: tuple[int, ...] = ()
    fail_streams: int = 0  # abort this many streams...
    fail_code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    fail_at: str = "audio"  # ...on their first audio request, or at "end" (half-close)
    hang: bool = False  # never answer and never close: deadlines and cancellation


class FakeRiva(riva_asr_pb2_grpc.RivaSpeechRecognitionServicer):
    def __init__(self) -> None:
        self.script = Script()
        self.streams: list[StreamRecord] = []
        self.opened = asyncio.Event()

    async def StreamingRecognize(
        self,
        request_iterator: AsyncIterator[riva_asr_pb2.StreamingRecognizeRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[riva_asr_pb2.StreamingRecognizeResponse]:
        rec = StreamRecord(metadata={k: str(v) for k, v in context.invocation_metadata()})
        self.streams.append(rec)
        self.opened.set()
        script = self.script
        failing = len(self.streams) <= script.fail_streams
        words = script.words
        committed = 0  # words already sent in an is_final result
        revealed = 0
        try:
            async for request in request_iterator:
                if rec.config is None:
                    if not request.HasField("streaming_config"):
                        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "config first")
                    rec.config = request.streaming_config
                    continue
                rec.audio_bytes += len(request.audio_content)
                rec.audio_requests += 1
                rec.audio_seen.set()
                if failing and script.fail_at == "audio":
                    await context.abort(script.fail_code, "injected failure")
                if script.hang:
                    continue
                heard_ms = rec.audio_bytes // _BYTES_PER_MS
                covered = sum(1 for _, _, end in words if end <= heard_ms)
                if covered == revealed:
                    continue
                revealed = covered
                for split in script.final_splits:
                    if committed < split <= covered:
                        yield _response(words[committed:split], is_final=True)
                        committed = split
                if covered > committed:
                    yield _response(words[committed:covered], is_final=False)
            # The request stream also ends like this when the client cancels; the
            # cancellation then reaches this handler at its next await, here.
            await asyncio.sleep(0.02)  # Riva's finalisation latency
            rec.half_closed = True
            if failing and script.fail_at == "end":
                await context.abort(script.fail_code, "injected failure")
            if script.hang:
                await asyncio.Event().wait()
            if committed < len(words):
                yield _response(words[committed:], is_final=True)
        except (asyncio.CancelledError, GeneratorExit):
            # grpc.aio stops a cancelled handler at its next await (CancelledError) or,
            # when it is suspended at a yield, by closing the generator (GeneratorExit).
            rec.cancelled = True
            raise
        finally:
            rec.done.set()


def _response(
    words: tuple[tuple[str, int, int], ...], *, is_final: bool
) -> riva_asr_pb2.StreamingRecognizeResponse:
    alt = riva_asr_pb2.SpeechRecognitionAlternative(
        transcript=" ".join(w for w, _, _ in words) + " ",  # Riva pads with a space
        confidence=0.9 if is_final else 0.0,
        words=[
            riva_asr_pb2.WordInfo(word=w, start_time=s, end_time=e, confidence=0.8)
            for w, s, e in words
        ],
    )
    result = riva_asr_pb2.StreamingRecognitionResult(
        alternatives=[alt],
        is_final=is_final,
        stability=1.0 if is_final else 0.1,
        audio_processed=words[-1][2] / 1000,
    )
    return riva_asr_pb2.StreamingRecognizeResponse(results=[result])


Riva = tuple[FakeRiva, str]


@pytest.fixture
async def riva() -> AsyncIterator[Riva]:
    fake = FakeRiva()
    server = grpc.aio.server()
    riva_asr_pb2_grpc.add_RivaSpeechRecognitionServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield fake, f"127.0.0.1:{port}"
    finally:
        await server.stop(grace=None)


# -- helpers ---------------------------------------------------------------------------


def _audio(ms: int) -> bytes:
    """A quiet 220 Hz tone: the fake does not listen, it only counts bytes."""
    n = ms * _MS
    return b"".join(
        int(3000 * math.sin(2 * math.pi * 220 * i / SAMPLE_RATE)).to_bytes(2, "little", signed=True)
        for i in range(n)
    )


AUDIO = _audio(UTTERANCE_MS)
CHUNK = 20 * _BYTES_PER_MS  # 20 ms frames, as transports deliver them


async def _send_all(stream: UtteranceStream, audio: bytes = AUDIO, pace_s: float = 0.0) -> None:
    for pos in range(0, len(audio), CHUNK):
        await stream.send(audio[pos : pos + CHUNK], CALL_OFFSET + pos // 2)
        if pace_s:
            await asyncio.sleep(pace_s)


async def _collect(stream: UtteranceStream) -> list[Hypothesis]:
    return [h async for h in stream]


def _recognizer(uri: str, **kwargs: Any) -> RivaRecognizer:
    kwargs.setdefault("retry_backoff_s", 0.01)
    return RivaRecognizer(uri, **kwargs)


async def _stream_started(fake: FakeRiva) -> None:
    await fake.opened.wait()
    await fake.streams[0].audio_seen.wait()


# -- tests -------------------------------------------------------------------------------


async def test_streams_partials_then_one_final_with_call_offsets(riva: Riva) -> None:
    fake, uri = riva
    asr = _recognizer(
        uri,
        language="en-US",
        boost_score=30.0,
        endpointing=RivaEndpointing(stop_history_ms=500, stop_threshold=0.3),
        metadata=[("x-api-key", "test-key")],
    )
    call = await asr.start_call(CallContext("c1", phrases=["Ken Sato", "Aiko Tanaka", " "]))
    stream = call.utterance()
    received: list[tuple[float, Hypothesis]] = []

    async def consume() -> None:
        async for hyp in stream:
            received.append((time.monotonic(), hyp))

    consumer = asyncio.create_task(consume())
    async with asyncio.timeout(5):
        await _send_all(stream, pace_s=0.005)
        ended_at = time.monotonic()
        await stream.end()
        await consumer
    await call.aclose()
    await asr.aclose()

    hyps = [h for _, h in received]
    assert hyps[-1].is_final and not any(h.is_final for h in hyps[:-1])
    # True streaming: partials arrived while audio was still being sent.
    assert any(t < ended_at for t, h in received if not h.is_final)
    assert all(TEXT.startswith(h.text) for h in hyps)
    # A partial spans from the utterance start to the audio Riva says it has processed.
    # (the fake reports audio_processed up to the end of the last word it revealed).
    for hyp in hyps[:-1]:
        assert (hyp.start_sample, hyp.end_sample) == (CALL_OFFSET, hyp.words[-1].end_sample)
    final = hyps[-1]
    assert final.text == TEXT and final.source == "riva"
    assert final.start_sample == CALL_OFFSET
    assert final.end_sample == CALL_OFFSET + len(AUDIO) // 2
    assert final.confidence == pytest.approx(0.9)
    # Word times: Riva's ms from the stream start, moved onto the call's sample clock.
    assert [(w.text, w.start_sample, w.end_sample) for w in final.words] == [
        (w, CALL_OFFSET + s * _MS, CALL_OFFSET + e * _MS) for w, s, e in WORDS
    ]

    (rec,) = fake.streams
    assert rec.audio_bytes == len(AUDIO) and rec.half_closed and not rec.cancelled
    assert rec.metadata["x-api-key"] == "test-key"
    cfg = rec.config
    assert cfg is not None and cfg.interim_results
    rc = cfg.config
    assert rc.encoding == riva_audio_pb2.AudioEncoding.LINEAR_PCM
    assert rc.sample_rate_hertz == SAMPLE_RATE and rc.audio_channel_count == 1
    assert rc.language_code == "en-US" and rc.max_alternatives == 1
    assert rc.enable_word_time_offsets and not rc.enable_automatic_punctuation
    assert [list(c.phrases) for c in rc.speech_contexts] == [["Ken Sato", "Aiko Tanaka"]]
    assert rc.speech_contexts[0].boost == pytest.approx(30.0)
    assert rc.HasField("endpointing_config")
    assert rc.endpointing_config.stop_history == 500
    assert rc.endpointing_config.stop_threshold == pytest.approx(0.3)


async def test_no_phrases_no_endpointing_sends_neither(riva: Riva) -> None:
    fake, uri = riva
    asr = _recognizer(uri)
    call = await asr.start_call(CallContext("c1"))
    stream = call.utterance()
    async with asyncio.timeout(5):
        await _send_all(stream)
        await stream.end()
        hyps = await _collect(stream)
    await asr.aclose()
    assert hyps[-1].text == TEXT
    rc = fake.streams[0].config.config
    assert not rc.speech_contexts and not rc.HasField("endpointing_config")


async def test_rivas_own_endpoints_are_joined_into_one_final(riva: Riva) -> None:
    fake, uri = riva
    fake.script = Script(final_splits=(3, 5))
    asr = _recognizer(uri)
    call = await asr.start_call(CallContext("c1"))
    stream = call.utterance()
    async with asyncio.timeout(5):
        await _send_all(stream)
        await stream.end()
        hyps = await _collect(stream)
    await asr.aclose()
    finals = [h for h in hyps if h.is_final]
    assert len(finals) == 1 and hyps[-1] is finals[0]
    assert finals[0].text == TEXT
    assert [w.text for w in finals[0].words] == TEXT.split()
    # Partials after a mid-stream is_final keep the committed text as their prefix.
    assert any(h.text.startswith("send five thousand yen") for h in hyps if not h.is_final)


async def test_consecutive_utterances_on_one_call(riva: Riva) -> None:
    fake, uri = riva
    asr = _recognizer(uri)
    call = await asr.start_call(CallContext("c1", phrases=["Ken Sato"]))
    async with asyncio.timeout(5):
        for k in range(2):
            stream = call.utterance()
            offset = k * 5 * SAMPLE_RATE
            for pos in range(0, len(AUDIO), CHUNK):
                await stream.send(AUDIO[pos : pos + CHUNK], offset + pos // 2)
            await stream.end()
            hyps = await _collect(stream)
            assert hyps[-1].text == TEXT
            assert hyps[-1].words[0].start_sample == offset + 100 * _MS
    await call.aclose()
    await asr.aclose()
    assert len(fake.streams) == 2


@pytest.mark.parametrize("fail_at", ["audio", "end"])
async def test_reconnects_and_replays_the_utterance(riva: Riva, fail_at: str) -> None:
    fake, uri = riva
    fake.script = Script(fail_streams=1, fail_at=fail_at)
    asr = _recognizer(uri, max_retries=2)
    call = await asr.start_call(CallContext("c1", phrases=["Ken Sato"]))
    stream = call.utterance()
    async with asyncio.timeout(5):
        await _send_all(stream)
        await stream.end()
        hyps = await _collect(stream)
    await asr.aclose()
    assert hyps[-1].is_final and hyps[-1].text == TEXT
    assert sum(h.is_final for h in hyps) == 1
    first, second = fake.streams
    assert first.config == second.config
    # The second stream got the whole utterance again, from its first sample.
    assert second.audio_bytes == len(AUDIO) and second.half_closed
    assert hyps[-1].words[0].start_sample == CALL_OFFSET + 100 * _MS


@pytest.mark.parametrize("fail_at", ["audio", "end"])
async def test_gives_up_with_asr_error_after_bounded_retries(riva: Riva, fail_at: str) -> None:
    fake, uri = riva
    fake.script = Script(fail_streams=99, fail_at=fail_at)
    asr = _recognizer(uri, max_retries=2)
    call = await asr.start_call(CallContext("c1"))
    stream = call.utterance()
    async with asyncio.timeout(5):
        await _send_all(stream)
        await stream.end()
        with pytest.raises(ASRError, match="after 3 attempt"):
            await _collect(stream)
    await asr.aclose()
    assert len(fake.streams) == 3  # the first try plus two retries


async def test_fatal_status_is_not_retried(riva: Riva) -> None:
    fake, uri = riva
    # Rejected at the half-close: while the client is still writing, grpc.aio can report
    # an early server status as INTERNAL (grpc/grpc#36066), which is retried instead.
    fake.script = Script(fail_streams=99, fail_code=grpc.StatusCode.INVALID_ARGUMENT, fail_at="end")
    asr = _recognizer(uri, max_retries=3)
    call = await asr.start_call(CallContext("c1"))
    stream = call.utterance()
    async with asyncio.timeout(5):
        await _send_all(stream)
        await stream.end()
        with pytest.raises(ASRError, match="INVALID_ARGUMENT"):
            await _collect(stream)
    await asr.aclose()
    assert len(fake.streams) == 1


async def test_unreachable_server_raises_asr_error_quickly() -> None:
    # Grab a free port and close it, so nothing listens there.
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await server.stop(grace=None)
    asr = _recognizer(f"127.0.0.1:{port}", max_retries=1)
    call = await asr.start_call(CallContext("c1"))
    stream = call.utterance()
    async with asyncio.timeout(5):
        await _send_all(stream)
        await stream.end()
        with pytest.raises(ASRError):
            await _collect(stream)
    await asr.aclose()


async def test_deadline_bounds_a_hung_server(riva: Riva) -> None:
    fake, uri = riva
    fake.script = Script(hang=True)
    asr = _recognizer(uri, request_timeout_s=0.5, max_retries=0)
    call = await asr.start_call(CallContext("c1"))
    stream = call.utterance()
    started = time.monotonic()
    async with asyncio.timeout(5):
        await _send_all(stream)
        await stream.end()
        with pytest.raises(ASRError, match="DEADLINE_EXCEEDED"):
            await _collect(stream)
        await asyncio.wait_for(fake.streams[0].done.wait(), 2)
    await asr.aclose()
    assert time.monotonic() - started < 3
    assert fake.streams[0].cancelled  # the server saw the RPC end, not a normal close


async def test_aclose_mid_utterance_cancels_the_rpc_on_the_server(riva: Riva) -> None:
    fake, uri = riva
    asr = _recognizer(uri)
    call = await asr.start_call(CallContext("c1"))
    stream = call.utterance()
    received: list[Hypothesis] = []
    answering = asyncio.Event()

    async def consume() -> None:
        async for hyp in stream:
            received.append(hyp)
            answering.set()

    consumer = asyncio.create_task(consume())
    async with asyncio.timeout(5):
        await _send_all(stream, AUDIO[: 600 * _BYTES_PER_MS])  # barge-in after 600 ms
        await answering.wait()  # the server is mid-stream, answering
        await stream.aclose()
        await consumer  # iteration ends, without a final
        rec = fake.streams[0]
        await asyncio.wait_for(rec.done.wait(), 2)
        await stream.aclose()  # idempotent
    await asr.aclose()
    assert rec.cancelled and not rec.half_closed
    assert received and not any(h.is_final for h in received)


async def test_call_aclose_cancels_open_utterances(riva: Riva) -> None:
    fake, uri = riva
    asr = _recognizer(uri)
    call = await asr.start_call(CallContext("c1"))
    stream = call.utterance()
    async with asyncio.timeout(5):
        await _send_all(stream, AUDIO[: 300 * _BYTES_PER_MS])
        await _stream_started(fake)
        await call.aclose()  # hang-up
        await asyncio.wait_for(fake.streams[0].done.wait(), 2)
        assert await _collect(stream) == []
    await asr.aclose()
    assert fake.streams[0].cancelled and not fake.streams[0].half_closed


async def test_empty_utterance_gives_an_empty_final_without_an_rpc(riva: Riva) -> None:
    fake, uri = riva
    asr = _recognizer(uri)
    call = await asr.start_call(CallContext("c1"))
    stream = call.utterance()
    async with asyncio.timeout(2):
        await stream.end()
        hyps = await _collect(stream)
    await asr.aclose()
    assert [(h.text, h.is_final) for h in hyps] == [("", True)]
    assert fake.streams == []


# -- the whole server on the Riva backend --------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_the_server_configured_for_riva_carries_a_call(riva: Riva) -> None:
    """`--asr.backend riva`: the real server streams a call's speech to (stand-in) Riva,
    boosts the caller's payee names, and understands Riva's transcript."""
    from clients.call import run_call
    from clients.local_server import LocalServer
    from tests.conftest import SPEECH, load_wav

    fake, uri = riva
    server = LocalServer("--asr.backend", "riva", "--asr.riva_uri", uri)
    await asyncio.to_thread(server.start)
    try:
        result = await run_call(server.url, audio=load_wav(SPEECH / "transfer_01.wav"), fast=True)
    finally:
        await asyncio.to_thread(server.stop)
    final = result.first("input_audio_transcription.completed")
    assert final is not None, result.events
    assert final[0]["text"] == TEXT and final[0]["source"] == "riva"
    understanding = result.first("understanding")[0]
    assert understanding["intent"] == "transfer_money"
    assert understanding["entities"]["amount"] == {"minor": 5000, "currency": "JPY"}
    config = fake.streams[0].config
    assert config is not None and config.interim_results
    boosted = {p for context in config.config.speech_contexts for p in context.phrases}
    assert {"Ken Sato", "Ken Saito", "Maria Garcia"} <= boosted
    assert fake.streams[0].audio_bytes > 16_000  # the utterance's audio, not a stub
