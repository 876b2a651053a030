"""Benchmark the embedded ASR decoders on the speech fixtures and the real recordings.

    .venv/bin/python -m loadtest.bench_asr [--speed 4] [--details] [--concurrency 4x2,8x4]

For each decoder - ``sphinx-domain`` (pocketsphinx with the per-call domain LM, no
Whisper), ``whisper`` (faster-whisper tiny.en alone, on the whole utterance), and the
combined ``embedded`` backend (``confirm_with_whisper="auto"``, and ``"always"``) - and
each audio set it reports WER, the final-transcript latency after the last audio chunk
(p50/p95) and the real-time factor (process CPU seconds per audio second, all threads).

The streaming decoders get the audio in 20 ms chunks paced at ``--speed`` x real time
(fast enough to keep the run short, slow enough that the decoder keeps up, so the
latency is what a live call sees). Whisper cannot stream: its latency is one decode.
``--concurrency`` then runs several calls at once through the combined backend and
reports their final latency and the event loop's lag (pocketsphinx holds the GIL).
Output is Markdown, for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
import wave
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agent.asr.base import CallContext
from agent.asr.domain import spoken_form
from agent.asr.embedded import EmbeddedRecognizer, WhisperDecoder
from agent.asr.wer import corpus_wer

SPEECH = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "speech"
PAYEES = (
    "Ken Sato",
    "Ken Saito",
    "Yuki Tanaka",
    "Hiroshi Suzuki",
    "Maria Garcia",
    "Priya Patel",
    "John Smith",
)
CHUNK_MS = 20


@dataclass
class Item:
    set_name: str
    audio: str
    reference: str
    pcm: bytes

    @property
    def seconds(self) -> float:
        return len(self.pcm) / 2 / 16_000


@dataclass
class Run:
    decoder: str
    set_name: str
    pairs: list[tuple[str, str]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    audio_s: float = 0.0
    whisper_used: int = 0
    details: list[str] = field(default_factory=list)


def load_items() -> list[Item]:
    items = []
    for base, default_set in ((SPEECH, None), (SPEECH / "real", "real")):
        for line in (base / "transcripts.jsonl").read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            with wave.open(str(base / row["audio"])) as w:
                pcm = w.readframes(w.getnframes())
            set_name = default_set or ("piper" if row["voice"] == "piper-joe" else "espeak")
            items.append(Item(set_name, row["audio"], row["transcript"], pcm))
    return items


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench_streaming(name: str, rec: EmbeddedRecognizer, items: list[Item], speed: float):
    runs: dict[str, Run] = {}
    call = await rec.start_call(CallContext("bench", PAYEES))
    offset = 0
    step = CHUNK_MS * 32
    for item in items:
        run = runs.setdefault(item.set_name, Run(name, item.set_name))
        utt = call.utterance()
        hyps = []

        async def read(utt=utt, hyps=hyps) -> None:
            async for h in utt:
                hyps.append(h)

        cpu0 = time.process_time()
        reader = asyncio.create_task(read())
        for i in range(0, len(item.pcm), step):
            await utt.send(item.pcm[i : i + step], offset + i // 2)
            await asyncio.sleep(CHUNK_MS / 1000 / speed)
        await utt.end()
        await reader
        run.cpu_s += time.process_time() - cpu0
        run.audio_s += item.seconds
        offset += len(item.pcm) // 2
        final = hyps[-1]
        assert utt.final_time is not None and utt.end_time is not None
        run.latencies.append(utt.final_time - utt.end_time)
        run.pairs.append((item.reference, final.text))
        run.whisper_used += utt.whisper_text is not None
        sph = utt.sphinx_result
        run.details.append(
            f"| {name} | {item.audio} | {sph.confidence if sph else 0:.2f} | {final.source} "
            f"| {run.latencies[-1] * 1000:.0f} | {final.text} |"
        )
    await call.aclose()
    return list(runs.values())


async def bench_whisper(items: list[Item], threads: int, beam_size: int):
    whisper = WhisperDecoder(threads=threads, workers=1, beam_size=beam_size, model_path=None)
    t0 = time.perf_counter()
    await asyncio.to_thread(whisper.load)
    load_s = time.perf_counter() - t0
    runs: dict[str, Run] = {}
    for item in items:
        run = runs.setdefault(item.set_name, Run("whisper", item.set_name))
        pcm = np.frombuffer(item.pcm, dtype=np.int16)
        cpu0, t0 = time.process_time(), time.perf_counter()
        text, _confidence = await asyncio.to_thread(whisper.transcribe, pcm, None)
        run.latencies.append(time.perf_counter() - t0)
        run.cpu_s += time.process_time() - cpu0
        run.audio_s += item.seconds
        run.pairs.append((item.reference, spoken_form(text)))
        run.details.append(
            f"| whisper | {item.audio} | - | whisper | {run.latencies[-1] * 1000:.0f} "
            f"| {spoken_form(text)} |"
        )
    return list(runs.values()), load_s


async def bench_concurrency(calls: int, speed: float, items: list[Item]) -> str:
    """``calls`` calls at ``speed`` x real time at once: latency and event-loop lag."""
    rec = EmbeddedRecognizer(confirm_with_whisper="auto")
    await rec.warm_up()
    lags: list[float] = []

    async def ticker() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t - 0.01)

    tick = asyncio.create_task(ticker())
    results = await asyncio.gather(
        *(bench_streaming(f"call-{i}", rec, items, speed) for i in range(calls))
    )
    tick.cancel()
    await rec.aclose()
    runs = [r for rs in results for r in rs]
    lat = [x for r in runs for x in r.latencies]
    pairs = [p for r in runs for p in r.pairs]
    return (
        f"| {calls} x {speed:g} = {calls * speed:g} | {len(lat)} | {corpus_wer(pairs):.1%} "
        f"| {statistics.median(lat) * 1000:.0f} ms | {percentile(lat, 0.95) * 1000:.0f} ms "
        f"| {percentile(lags, 0.99) * 1000:.0f} ms | {max(lags) * 1000:.0f} ms |"
    )


def table(runs: list[Run]) -> str:
    lines = [
        "| decoder | audio set | utts | WER | final latency p50 | p95 | RTF (CPU s / audio s) "
        "| Whisper used |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        lines.append(
            f"| {r.decoder} | {r.set_name} | {len(r.pairs)} | {corpus_wer(r.pairs):.1%} "
            f"| {statistics.median(r.latencies) * 1000:.0f} ms "
            f"| {percentile(r.latencies, 0.95) * 1000:.0f} ms | {r.cpu_s / r.audio_s:.3f} "
            f"| {r.whisper_used}/{len(r.pairs)} |"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speed", type=float, default=4.0, help="pace, x real time")
    parser.add_argument("--whisper-threads", type=int, default=2)
    parser.add_argument("--beam-size", type=int, default=1)
    parser.add_argument("--details", action="store_true", help="per-utterance rows")
    parser.add_argument(
        "--concurrency",
        default="4x2,8x4",
        help="CALLSxSPEED runs of the piper set through embedded (auto) at once; '' skips",
    )
    parser.add_argument(
        "--decoders",
        default="sphinx-domain,sphinx-domain-fresh,whisper,embedded-auto,embedded-always",
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    items = load_items()
    wanted = args.decoders.split(",")
    runs: list[Run] = []
    notes: list[str] = []

    t0 = time.perf_counter()
    sphinx = EmbeddedRecognizer(confirm_with_whisper="never")
    await sphinx.warm_up()
    notes.append(f"sphinx warm-up (base corpus + cmudict): {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    model = await asyncio.to_thread(sphinx.models.get, PAYEES)
    notes.append(
        f"per-call domain LM + dictionary for 7 payees (cache miss): {model.build_s * 1000:.0f}"
        f" ms; start_call with a cached LM: "
    )
    t0 = time.perf_counter()
    call = await sphinx.start_call(CallContext("probe", PAYEES))
    notes[-1] += f"{(time.perf_counter() - t0) * 1000:.0f} ms"
    await call.aclose()
    if "sphinx-domain" in wanted:
        runs += await bench_streaming("sphinx-domain", sphinx, items, args.speed)
    await sphinx.aclose()
    if "sphinx-domain-fresh" in wanted:
        # Every utterance the first of a new call (no within-call CMN adaptation),
        # starting from the built-in default mean, as on a freshly started server.
        fresh: dict[str, Run] = {}
        for item in items:
            rec = EmbeddedRecognizer(confirm_with_whisper="never")
            for r in await bench_streaming(
                "sphinx-domain, new server+call", rec, [item], args.speed
            ):
                merged = fresh.setdefault(r.set_name, Run(r.decoder, r.set_name))
                merged.pairs += r.pairs
                merged.latencies += r.latencies
                merged.cpu_s += r.cpu_s
                merged.audio_s += r.audio_s
            await rec.aclose()
        runs += fresh.values()

    if "whisper" in wanted:
        whisper_runs, load_s = await bench_whisper(items, args.whisper_threads, args.beam_size)
        runs += whisper_runs
        notes.append(f"Whisper tiny.en int8 load: {load_s:.2f} s")

    for mode in ("auto", "always"):
        if f"embedded-{mode}" not in wanted:
            continue
        rec = EmbeddedRecognizer(
            confirm_with_whisper=mode,
            whisper_threads=args.whisper_threads,
            whisper_beam_size=args.beam_size,
        )
        await rec.warm_up()
        runs += await bench_streaming(f"embedded ({mode})", rec, items, args.speed)
        await rec.aclose()

    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs")
    print(f"Chunks of {CHUNK_MS} ms paced at {args.speed:g}x real time.\n")
    print(table(runs))
    print()
    for note in notes:
        print(f"- {note}")
    if args.concurrency:
        piper = [i for i in items if i.set_name == "piper"]
        print(
            "\n| calls x speed = real-time streams | utts | WER | final p50 | final p95 "
            "| loop lag p99 | loop lag max |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for spec in args.concurrency.split(","):
            calls, speed = spec.split("x")
            print(await bench_concurrency(int(calls), float(speed), piper))
    if args.details:
        print("\n| decoder | audio | sphinx confidence | source | latency ms | text |")
        print("| --- | --- | ---: | --- | ---: | --- |")
        for r in runs:
            print("\n".join(r.details))


if __name__ == "__main__":
    asyncio.run(main())
