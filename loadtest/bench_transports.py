"""End of speech -> reply, per transport, and barge-in -> silence, on one local server.

    python -m loadtest.bench_transports [--rounds 1] [--url ws://...]

Each fixture utterance is played at real-time pace, one call at a time, over:
  * protocol v1, 16 kHz PCM16 (the browser/app path, text reply),
  * protocol v1, 8 kHz mu-law (telephony audio over the v1 socket, text reply),
  * the Twilio bridge (8 kHz mu-law in, spoken reply out).
Latencies are measured by the caller from the frame that held the last speech sample.
Barge-in: the caller talks over a long reply; time from the first sample of the
interruption to the server's ``clear``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from clients.call import run_call
from clients.local_server import LocalServer
from clients.twilio import run_twilio_call
from loadtest.conversations import utterance
from loadtest.report import percentiles
from protocol.codecs import resample

FIXTURES = [
    "balance_01.wav",
    "transactions_01.wav",
    "transfer_01.wav",
    "transfer_03.wav",
    "bill_01.wav",
    "card_lock_01.wav",
    "handoff_01.wav",
    "faq_01.wav",
]


@contextmanager
def _server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with LocalServer() as server:
        yield server.url


async def bench(url: str, rounds: int) -> dict[str, dict[str, Any]]:
    samples: dict[str, list[float]] = {}

    def add(key: str, value: float | None) -> None:
        if value is not None:
            samples.setdefault(key, []).append(value)

    for _ in range(rounds):
        for name in FIXTURES:
            audio = utterance(name).samples
            v1 = (await run_call(url, audio=audio)).summary()
            add(
                "v1 pcm16 16k: speech end -> final transcript",
                v1.get("speech_end_to_final_transcript_ms"),
            )
            add(
                "v1 pcm16 16k: speech end -> understanding",
                v1.get("speech_end_to_understanding_ms"),
            )
            add(
                "v1 pcm16 16k: speech end -> reply text done",
                v1.get("speech_end_to_response_done_ms"),
            )
            mulaw = (
                await run_call(url, audio=resample(audio, 16_000, 8_000), rate=8_000, codec="mulaw")
            ).summary()
            add(
                "v1 mu-law 8k: speech end -> understanding",
                mulaw.get("speech_end_to_understanding_ms"),
            )
            phone = (await run_twilio_call(url, [audio])).summary()
            for ms in phone.get("speech_end_to_first_audio_ms", [])[:1]:
                add("twilio: speech end -> first reply audio", ms)
        barge = (
            await run_twilio_call(
                url,
                [utterance("transfer_02.wav").samples, utterance("cancel_01.wav").samples],
                barge_in_after_s=0.5,
            )
        ).summary()
        add("twilio: barge-in speech -> clear", barge.get("barge_in_to_clear_ms"))
    return {key: percentiles(values) for key, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--url", default=None, help="a running server (default: start one)")
    args = parser.parse_args()
    with _server(args.url) as url:
        results = asyncio.run(bench(url, args.rounds))
    print(f"{'measure (ms)':<52}{'n':>4}{'p50':>8}{'p95':>8}")
    for key, row in results.items():
        p50, p95 = (f"{row[p]:.0f}" if row["n"] else "-" for p in ("p50", "p95"))
        print(f"{key:<52}{row['n']:>4}{p50:>8}{p95:>8}")


if __name__ == "__main__":
    main()
