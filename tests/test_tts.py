"""Spoken replies: phrase splitting, the embedded Piper voice (checked by ear: the
embedded recogniser must understand it), and the Riva TTS client against a stand-in
Riva server speaking the real protocol (a contract test: Riva needs a GPU)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import numpy as np
import pytest
from riva.client.proto import riva_audio_pb2, riva_tts_pb2, riva_tts_pb2_grpc

from agent.asr.base import CallContext
from agent.asr.wer import word_error_rate
from agent.tts.base import TTSError
from agent.tts.phrases import PhraseSplitter
from agent.tts.riva import RivaSynthesizer


def split(*deltas: str) -> list[str]:
    splitter = PhraseSplitter()
    out = [p for d in deltas for p in splitter.push(d)]
    return out + splitter.flush()


def test_phrases_end_at_sentences_and_long_clauses() -> None:
    assert split("Okay. ", "Your balance is 5,234.50 pounds.") == [
        "Okay.",
        "Your balance is 5,234.50 pounds.",
    ]
    assert split("Did you mean Ken Sato, or Ken Saito?") == [
        "Did you mean Ken Sato,",
        "or Ken Saito?",
    ]
    assert split("Yes, ", "done.") == ["Yes, done."]  # too short to stand alone


def test_phrases_wait_for_the_next_token_before_cutting() -> None:
    splitter = PhraseSplitter()
    assert splitter.push("It costs 4.") == []  # "4." may be "4.50"
    assert splitter.push("50 pounds. Anything") == ["It costs 4.50 pounds."]
    assert splitter.flush() == ["Anything"]


# -- Piper ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def piper():
    from agent.tts.piper import PiperSynthesizer

    return PiperSynthesizer()


@pytest.mark.slow
async def test_piper_speech_is_understood_by_the_recogniser(piper) -> None:
    from agent.asr.embedded import EmbeddedRecognizer

    text = "send five thousand yen to Ken Sato"
    pcm = await asyncio.to_thread(piper.synthesise, text)
    audio = np.frombuffer(pcm, dtype="<i2")
    assert 1.0 < len(audio) / 16_000 < 4.0
    asr = EmbeddedRecognizer(confirm_with_whisper="never")
    call = await asr.start_call(CallContext("tts", phrases=("Ken Sato",)))
    stream = call.utterance()
    padded = np.concatenate([np.zeros(3200, np.int16), audio, np.zeros(4800, np.int16)])
    for i in range(0, len(padded), 320):
        await stream.send(padded[i : i + 320].tobytes(), i)
    await stream.end()
    final = [h async for h in stream][-1]
    await call.aclose()
    await asr.aclose()
    assert word_error_rate(text, final.text) <= 0.2, final.text


@pytest.mark.slow
async def test_piper_stream_speaks_the_first_phrase_before_the_text_ends(piper) -> None:
    stream = piper.stream()
    await stream.push("Your balance is fifty pounds. ")
    await stream.push("Anything else?")  # the first phrase is complete now
    chunks = stream.__aiter__()
    first = await asyncio.wait_for(chunks.__anext__(), 10)
    assert first.phrase == "Your balance is fifty pounds." and len(first.pcm16) > 16_000
    await stream.end()
    rest = [c async for c in chunks]
    assert [(c.phrase_index, c.last) for c in rest] == [(0, True), (1, False), (1, True)]


@pytest.mark.slow
async def test_piper_stream_close_stops_pending_phrases(piper) -> None:
    stream = piper.stream()
    await stream.push("One two three four. " * 5)
    await stream.aclose()
    assert [c async for c in stream] == []


# -- Riva (contract) --------------------------------------------------------------------


class FakeRivaTTS(riva_tts_pb2_grpc.RivaSpeechSynthesisServicer):
    def __init__(self) -> None:
        self.requests: list[riva_tts_pb2.SynthesizeSpeechRequest] = []
        self.fail = False
        self.hang = False
        self.cancelled = asyncio.Event()

    async def SynthesizeOnline(
        self, request: riva_tts_pb2.SynthesizeSpeechRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[riva_tts_pb2.SynthesizeSpeechResponse]:
        self.requests.append(request)
        if self.fail:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "model not loaded")
        try:
            samples = len(request.text) * 160  # 10 ms of audio per character
            for part in range(3):
                yield riva_tts_pb2.SynthesizeSpeechResponse(
                    audio=bytes([part]) * (samples * 2 // 3)
                )
                if self.hang:
                    await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


@pytest.fixture
async def riva_tts() -> AsyncIterator[tuple[FakeRivaTTS, str]]:
    fake = FakeRivaTTS()
    server = grpc.aio.server()
    riva_tts_pb2_grpc.add_RivaSpeechSynthesisServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield fake, f"127.0.0.1:{port}"
    await server.stop(grace=None)


async def test_riva_tts_streams_each_phrase_in_order(riva_tts) -> None:
    fake, uri = riva_tts
    tts = RivaSynthesizer(uri, voice="English-US.Female-1")
    stream = tts.stream()
    await stream.push("Send 5,000 yen to Ken Sato? ")
    await stream.push("Say yes or no.")
    await stream.end()
    chunks = [c async for c in stream]
    await tts.aclose()
    assert [r.text for r in fake.requests] == ["Send 5,000 yen to Ken Sato?", "Say yes or no."]
    request = fake.requests[0]
    assert request.sample_rate_hz == 16_000
    assert request.encoding == riva_audio_pb2.AudioEncoding.LINEAR_PCM
    assert request.voice_name == "English-US.Female-1"
    expected = [(0, False)] * 3 + [(0, True)] + [(1, False)] * 3 + [(1, True)]
    assert [(c.phrase_index, c.last) for c in chunks] == expected
    assert [c.pcm16[:1] for c in chunks[:4]] == [b"\x00", b"\x01", b"\x02", b""]


async def test_riva_tts_failure_is_a_tts_error(riva_tts) -> None:
    fake, uri = riva_tts
    fake.fail = True
    tts = RivaSynthesizer(uri)
    stream = tts.stream()
    await stream.push("Hello there.")
    await stream.end()
    with pytest.raises(TTSError, match="UNAVAILABLE"):
        _ = [c async for c in stream]
    await tts.aclose()


async def test_riva_tts_close_cancels_synthesis_on_the_server(riva_tts) -> None:
    fake, uri = riva_tts
    fake.hang = True
    tts = RivaSynthesizer(uri)
    stream = tts.stream()
    await stream.push("A long answer that the caller interrupts.")
    await stream.end()
    chunks = stream.__aiter__()
    await asyncio.wait_for(chunks.__anext__(), 5)  # audio is flowing
    await stream.aclose()  # barge-in
    await asyncio.wait_for(fake.cancelled.wait(), 5)
    await tts.aclose()
