"""The README's first command: start the server and put a real call through it.

Starts ``python -m agent serve`` on a free loopback port, streams a bundled banking
utterance recording at real-time pace over a WebSocket, and prints what the caller would
see: partial and final transcripts, what was understood, the reply and the turn's stage
timings, then stops the server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from clients.call import read_wav, run_call
from clients.local_server import PROJECT_ROOT, LocalServer
from protocol.codecs import resample

DEFAULT_RECORDING = PROJECT_ROOT / "tests" / "fixtures" / "speech" / "transfer_01.wav"


def _show(event: dict[str, Any]) -> None:
    kind = event["type"]
    if kind == "input_audio_transcription.partial":
        print(f"  partial      : {event['text']}")
    elif kind == "input_audio_transcription.completed":
        print(f"  final        : {event['text']}   [{event['source']}]")
    elif kind == "understanding":
        print(
            f"  understood   : intent={event['intent']} confidence={event['confidence']:.2f} "
            f"entities={event['entities']}"
        )
    elif kind == "response.text.delta":
        print(f"  reply        : {event['delta']}")
    elif kind == "turn.metrics":
        print("  stage timings (ms after the end of speech, measured by the server):")
        for name, ms in event["latency_ms"].items():
            print(f"    {name.removeprefix('speech_end_to_'):<22}{ms:8.1f}")
    elif kind == "error":
        print(f"  error        : {event['code']}: {event['message']}")
    elif kind in ("input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped"):
        offset = event.get("audio_start_ms", event.get("audio_end_ms"))
        print(f"  {kind.rsplit('.', 1)[1]:<13}: at {offset} ms of audio")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clients.demo", description=__doc__)
    parser.add_argument("wav", nargs="?", type=Path, default=DEFAULT_RECORDING)
    args = parser.parse_args(argv)
    samples, rate = read_wav(args.wav)
    print("starting the agent server (embedded ASR; loading models) ...", flush=True)
    with LocalServer() as server:
        print(
            f"server listening at {server.url}  (health: {server.http_url}/healthz, "
            f"metrics: {server.http_url}/metrics)"
        )
        shown = args.wav.resolve()
        if shown.is_relative_to(PROJECT_ROOT):
            shown = shown.relative_to(PROJECT_ROOT)
        print(f"calling with {shown} at real-time pace ...")
        result = asyncio.run(
            run_call(server.url, audio=resample(samples, rate, 16_000), on_event=_show)
        )
    summary = result.summary()
    print("caller-side latency (from the moment the last speech sample was sent):")
    for key, value in summary.items():
        if key.endswith("_ms") and isinstance(value, float):
            print(f"    {key.removeprefix('speech_end_to_').removesuffix('_ms'):<22}{value:8.1f}")
    ok = result.closed_cleanly and "errors" not in summary and summary["transcript"]
    print("call completed" if ok else "call FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
