"""The embedded ASR backend on real audio, through the streaming interface only.

The fixture wavs (synthetic banking commands in two voices, and two real off-domain
recordings) are streamed in 20-32 ms chunks exactly as the pipeline does, and the
transcripts are held to word-error-rate bounds, not exact strings. No server here: the
end-to-end tests cover the socket path.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.asr import domain
from agent.asr.base import CallContext, Hypothesis
from agent.asr.embedded import DomainModelCache, EmbeddedRecognizer, EmbeddedUtteranceStream
from agent.asr.wer import corpus_wer, word_error_rate

SPEECH = Path(__file__).parent / "fixtures" / "speech"
PAYEES = (
    "Ken Sato",
    "Ken Saito",
    "Yuki Tanaka",
    "Hiroshi Suzuki",
    "Maria Garcia",
    "Priya Patel",
    "John Smith",
)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


FIXTURES = _rows(SPEECH / "transcripts.jsonl")
REAL = _rows(SPEECH / "real" / "transcripts.jsonl")


def _pcm(path: Path) -> bytes:
    with wave.open(str(path)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16_000, 1, 2)
        return w.readframes(w.getnframes())


async def stream(
    utt: EmbeddedUtteranceStream,
    pcm: bytes,
    offset: int,
    chunk_ms: int = 20,
    speed: float | None = None,
) -> list[Hypothesis]:
    """Send ``pcm`` in chunks while reading hypotheses concurrently, as a pipeline does.

    ``speed``: pace the chunks at that multiple of real time (None: as fast as possible,
    where the decoder batches queued audio and a reader sees only the latest partial).
    """
    hyps: list[Hypothesis] = []

    async def read() -> None:
        async for hyp in utt:
            hyps.append(hyp)

    reader = asyncio.create_task(read())
    step = chunk_ms * 32  # bytes: 16 samples/ms x 2 bytes
    for i in range(0, len(pcm), step):
        await utt.send(pcm[i : i + step], offset + i // 2)
        if speed:
            await asyncio.sleep(chunk_ms / 1000 / speed)
    await utt.end()
    await asyncio.wait_for(reader, 30)
    return hyps


@pytest.fixture(scope="module")
def recognizer() -> Iterator[EmbeddedRecognizer]:
    """One recognizer for the module (loading Whisper costs ~0.5-1.5 s)."""
    rec = EmbeddedRecognizer(confirm_with_whisper="auto", whisper_threads=2)
    asyncio.run(rec.warm_up())
    yield rec
    asyncio.run(rec.aclose())


@pytest.fixture(scope="module")
def fast_recognizer() -> Iterator[EmbeddedRecognizer]:
    """Sphinx only: the in-domain path without Whisper."""
    rec = EmbeddedRecognizer(confirm_with_whisper="never")
    yield rec
    asyncio.run(rec.aclose())


async def _transcribe_all(rec: EmbeddedRecognizer, rows: list[dict], base: Path):
    call = await rec.start_call(CallContext("test-call", PAYEES))
    offset, out = 0, []
    try:
        for row in rows:
            pcm = _pcm(base / row["audio"])
            hyps = await stream(call.utterance(), pcm, offset)
            offset += len(pcm) // 2
            out.append((row, hyps))
    finally:
        await call.aclose()
    return out


async def test_in_domain_fixtures_within_wer_bounds(recognizer: EmbeddedRecognizer) -> None:
    results = await _transcribe_all(recognizer, FIXTURES, SPEECH)
    report = "\n".join(
        f"{r['voice']:13s} {r['transcript']!r} -> {h[-1].text!r} ({h[-1].source})"
        for r, h in results
    )
    for row, hyps in results:
        assert hyps and hyps[-1].is_final, row["audio"]
        assert sum(h.is_final for h in hyps) == 1, row["audio"]
    piper = [(r["transcript"], h[-1].text) for r, h in results if r["voice"] == "piper-joe"]
    espeak = [(r["transcript"], h[-1].text) for r, h in results if r["voice"] != "piper-joe"]
    # Measured: piper ~2% WER, espeak-ng (robotic formant voice) ~10% (docs/BENCHMARKS.md).
    assert corpus_wer(piper) <= 0.08, report
    assert corpus_wer(espeak) <= 0.35, report
    assert all(word_error_rate(ref, hyp) <= 0.5 for ref, hyp in piper), report


async def test_payee_names_come_from_the_call_context(
    fast_recognizer: EmbeddedRecognizer,
) -> None:
    """ "Yuki" is not in cmudict: only the per-call model with the caller's names has it."""
    pcm = _pcm(SPEECH / "transfer_03.wav")  # send ten thousand yen to Yuki Tanaka
    with_names = await fast_recognizer.start_call(CallContext("a", PAYEES))
    without = await fast_recognizer.start_call(CallContext("b", ()))
    hyp_with = (await stream(with_names.utterance(), pcm, 0))[-1]
    hyp_without = (await stream(without.utterance(), pcm, 0))[-1]
    assert hyp_with.source == "sphinx-domain"
    assert word_error_rate("send ten thousand yen to yuki tanaka", hyp_with.text) <= 0.15
    assert "yuki" not in hyp_without.text.split()
    await with_names.aclose()
    await without.aclose()


async def test_new_calls_start_from_recent_callers_cepstral_mean(
    fast_recognizer: EmbeddedRecognizer,
) -> None:
    """Live CMN needs seconds of speech; a call's first command must not start cold."""
    call = await fast_recognizer.start_call(CallContext("cmn", PAYEES))
    before = fast_recognizer.cmn_prior
    await stream(call.utterance(), _pcm(SPEECH / "balance_02.wav"), 0)
    await call.aclose()
    assert fast_recognizer.cmn_prior != before
    nxt = await fast_recognizer.start_call(CallContext("cmn-2", PAYEES))
    assert nxt.session._decoder.get_cmn(False) == fast_recognizer.cmn_prior
    await nxt.aclose()


async def test_real_off_domain_recordings_go_to_whisper(recognizer: EmbeddedRecognizer) -> None:
    results = await _transcribe_all(recognizer, REAL, SPEECH / "real")
    for row, hyps in results:
        final = hyps[-1]
        assert final.source == "whisper", (row["audio"], final)
        assert final.confidence is not None and 0.0 < final.confidence <= 1.0
        # Partials come from sphinx; late ones already flag the speech as off-domain.
        late = [h.confidence for h in hyps[:-1] if h.confidence is not None][-3:]
        assert late and max(late) < 0.6, late
        # Whisper tiny.en: ~0-5% here; the domain decoder alone is ~80%.
        assert word_error_rate(row["transcript"], final.text) <= 0.2, final.text


async def test_partials_precede_one_final_with_sane_offsets(
    fast_recognizer: EmbeddedRecognizer,
) -> None:
    row = next(r for r in FIXTURES if r["audio"] == "transfer_02.wav")
    pcm = _pcm(SPEECH / row["audio"])
    call = await fast_recognizer.start_call(CallContext("c", PAYEES))
    offset = 48_000  # the utterance starts 3 s into the call
    hyps = await stream(call.utterance(), pcm, offset, chunk_ms=32, speed=4.0)
    await call.aclose()

    partials, final = hyps[:-1], hyps[-1]
    assert final.is_final and not any(h.is_final for h in partials)
    assert len(partials) >= 2
    for h in hyps:
        assert h.start_sample == offset
        assert offset < h.end_sample <= offset + len(pcm) // 2
    assert final.end_sample == offset + len(pcm) // 2
    # Partials: only when the text changed, and at least ~200 ms of audio apart.
    texts = [p.text for p in partials]
    assert all(a != b for a, b in itertools.pairwise(texts))
    gaps = [b.end_sample - a.end_sample for a, b in itertools.pairwise(partials)]
    assert all(g >= 200 * 16 for g in gaps), gaps
    # Words lie inside the utterance, in order, after the leading 0.3 s of silence.
    assert final.words
    starts = [w.start_sample for w in final.words]
    assert starts == sorted(starts)
    assert final.words[0].start_sample >= offset + int(0.2 * 16_000)
    assert all(offset <= w.start_sample < w.end_sample <= final.end_sample for w in final.words)
    assert 0.0 <= (final.confidence or 0.0) <= 1.0
    assert all(p.confidence is None or 0.0 <= p.confidence <= 1.0 for p in partials)
    assert partials[-1].confidence is not None and partials[-1].confidence >= 0.6


async def test_aclose_mid_utterance_returns_promptly_and_call_continues(
    recognizer: EmbeddedRecognizer,
) -> None:
    call = await recognizer.start_call(CallContext("hangup", PAYEES))
    utt = call.utterance()
    got: list[Hypothesis] = []

    async def read() -> None:
        async for hyp in utt:
            got.append(hyp)

    reader = asyncio.create_task(read())
    pcm = _pcm(SPEECH / "real" / "jfk.wav")
    for i in range(0, len(pcm) // 2, 640):
        await utt.send(pcm[i : i + 640], i // 2)
    t0 = time.perf_counter()
    await asyncio.wait_for(utt.aclose(), 2)
    await asyncio.wait_for(reader, 2)  # iteration stops: no final for an abandoned one
    assert time.perf_counter() - t0 < 1.0
    assert not any(h.is_final for h in got)
    await utt.aclose()  # idempotent

    # The call's decoder was reset: the next utterance decodes normally.
    pcm = _pcm(SPEECH / "balance_01.wav")
    hyps = await stream(call.utterance(), pcm, 200_000)
    assert word_error_rate("what's my balance", hyps[-1].text) == 0.0
    await asyncio.wait_for(call.aclose(), 2)


async def test_aclose_while_whisper_runs_does_not_hang(recognizer: EmbeddedRecognizer) -> None:
    call = await recognizer.start_call(CallContext("barge-in", PAYEES))
    utt = call.utterance()
    pcm = _pcm(SPEECH / "real" / "librispeech_2412-153948-0000.wav")
    for i in range(0, len(pcm), 1024):
        await utt.send(pcm[i : i + 1024], i // 2)
    await utt.end()
    await asyncio.sleep(0.3)  # sphinx done, Whisper (off-domain speech) in progress
    await asyncio.wait_for(utt.aclose(), 1)
    await asyncio.wait_for(call.aclose(), 1)


async def test_decoding_does_not_block_the_event_loop(recognizer: EmbeddedRecognizer) -> None:
    """A Whisper decode takes ~0.5-1 s; a ticker on the loop must keep ticking."""
    lags: list[float] = []

    async def ticker() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t - 0.01)

    tick = asyncio.create_task(ticker())
    call = await recognizer.start_call(CallContext("loop-lag", PAYEES))
    utt = call.utterance()
    try:
        hyps = await stream(utt, _pcm(SPEECH / "real" / REAL[0]["audio"]), 0)
    finally:
        tick.cancel()
        await call.aclose()
    assert hyps[-1].source == "whisper"
    assert utt.final_time is not None and utt.end_time is not None
    whisper_s = utt.final_time - utt.end_time
    # Had the decode run on the loop, one tick would have waited all of it. Allow for
    # a busy 2-core machine where the OS, not the GIL, delays the loop thread.
    assert max(lags) < max(0.5 * whisper_s, 0.1), (max(lags), whisper_s)


async def test_end_without_audio_gives_an_empty_final(recognizer: EmbeddedRecognizer) -> None:
    """A VAD false start: no audio, so no Whisper decode (it would hallucinate)."""
    call = await recognizer.start_call(CallContext("empty", PAYEES))
    utt = call.utterance()
    await utt.end()
    hyps = [h async for h in utt]
    assert [(h.text, h.is_final, h.source) for h in hyps] == [("", True, "sphinx-domain")]
    assert utt.whisper_text is None
    await call.aclose()


async def test_odd_byte_count_is_rejected(fast_recognizer: EmbeddedRecognizer) -> None:
    call = await fast_recognizer.start_call(CallContext("odd", ()))
    utt = call.utterance()
    with pytest.raises(ValueError):
        await utt.send(b"\x00\x01\x02", 0)
    await call.aclose()


def test_never_mode_does_not_load_whisper(fast_recognizer: EmbeddedRecognizer) -> None:
    assert fast_recognizer.whisper._model is None


def test_romaji_names_get_pronunciations() -> None:
    assert domain.guess_pronunciation("yuki") == "Y UW K IY"
    assert domain.guess_pronunciation("shibuya") == "SH IY B UW Y AA"
    assert domain.guess_pronunciation("priya").startswith("P R IY")


def test_spoken_form_and_wer_ignore_formatting() -> None:
    assert domain.spoken_form("Transfer $250 to Maria Garcia.") == (
        "transfer two hundred fifty dollars to maria garcia"
    )
    assert domain.spoken_form("Send 5,000 yen on the 21st") == (
        "send five thousand yen on the twenty first"
    )
    ref = "transfer two hundred and fifty dollars to Maria Garcia"
    assert word_error_rate(ref, "Transfer $250 to Maria Garcia.") == 0.0
    assert word_error_rate("send money to ken", "send money to kent") == 0.25
    assert corpus_wer([("a b", "a"), ("c d", "c d")]) == 0.25


def test_domain_models_are_cached_per_phrase_set(tmp_path: Path) -> None:
    cache = DomainModelCache(tmp_path, max_entries=1)
    first = cache.get(["Ken Sato", "Yuki Tanaka"])
    assert cache.get(["yuki tanaka", "KEN SATO", ""]) is first  # same set, any order/case
    assert {"yuki", "tanaka", "sato"} <= first.vocabulary
    second = cache.get(["Priya Patel"])
    assert second is not first and second.lm_path.exists()
    assert not first.lm_path.exists()  # evicted: its files are gone
