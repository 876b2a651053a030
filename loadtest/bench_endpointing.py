"""Adaptive end of turn vs a fixed silence, on the speech fixtures, side by side.

    python -m loadtest.bench_endpointing [--rounds 1]

Two local servers run at once: one with the adaptive end of turn (the partial's
understanding picks a short silence for a complete command, a long one for a clearly
unfinished one) and one with the fixed default silence and no work on partials (the
sequential baseline). Every single-utterance fixture is played to each at real-time
pace, alternating, one call at a time. Measured from the caller's side: end of speech ->
understanding; and cut-offs: an utterance that came out as more than one turn, i.e. the
server ended the turn while the caller was still speaking.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from typing import Any

from agent.asr.wer import word_error_rate
from clients.call import run_call
from clients.local_server import LocalServer
from loadtest.conversations import fixtures, utterance
from loadtest.report import percentiles

MODES = {
    "adaptive": (),
    "fixed": ("--vad.adaptive", "false", "--pipeline.overlap", "false"),
}


async def play(url: str, name: str) -> dict[str, Any]:
    fixture = utterance(name)
    result = await run_call(url, audio=fixture.samples)
    summary = result.summary()
    turns = {e["turn"] for e in result.events if e["type"] == "input_audio_buffer.speech_started"}
    return {
        "latency_ms": summary.get("speech_end_to_understanding_ms"),
        "turns": len(turns),
        "wer": word_error_rate(fixture.transcript, summary.get("transcript", "")),
    }


async def bench(urls: dict[str, str], rounds: int) -> dict[str, dict[str, Any]]:
    names = sorted(fixtures())
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in urls}
    for _ in range(rounds):
        for name in names:
            for mode, url in urls.items():
                rows[mode].append({"name": name, **await play(url, name)})
    report = {}
    for mode, results in rows.items():
        latency = percentiles([r["latency_ms"] for r in results if r["latency_ms"] is not None])
        report[mode] = {
            "utterances": len(results),
            "p50_ms": round(latency["p50"]),
            "p95_ms": round(latency["p95"]),
            "mean_ms": round(latency["mean"]),
            "cut_offs": [r["name"] for r in results if r["turns"] > 1],
            "mean_wer": round(statistics.fmean(r["wer"] for r in results), 3),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    servers = {mode: LocalServer(*flags).start() for mode, flags in MODES.items()}
    try:
        report = asyncio.run(bench({m: s.url for m, s in servers.items()}, args.rounds))
    finally:
        for server in servers.values():
            server.stop()
    print(f"{'mode':<10}{'n':>4}{'p50':>7}{'p95':>7}{'mean':>7}{'WER':>7}  cut-offs")
    for mode, row in report.items():
        print(
            f"{mode:<10}{row['utterances']:>4}{row['p50_ms']:>7}{row['p95_ms']:>7}"
            f"{row['mean_ms']:>7}{row['mean_wer']:>7}  {', '.join(row['cut_offs']) or '-'}"
        )
    ratio = report["adaptive"]["p50_ms"] / report["fixed"]["p50_ms"]
    print(f"adaptive/fixed p50 ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
