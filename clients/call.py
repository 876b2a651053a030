"""Put a call through the server from a wav file (or typed text) and time it.

    python -m clients.call FILE.wav [--url ws://127.0.0.1:8765] [--fast]
    python -m clients.call --text "what's my balance"

Streams the file in 20 ms frames at real-time pace (``--fast``: as fast as the socket
takes it), followed by trailing silence so the server's endpointer can end the turn,
then ``session.end``. Every server event is printed as one JSON line; the last line is a
summary of latencies measured from the caller's side, starting at the moment the frame
holding the file's last speech sample was sent.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from websockets.asyncio.client import connect

from protocol.codecs import array_to_pcm16, mulaw_encode, resample

FRAME_MS = 20


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """Mono int16 samples and the sample rate of a PCM16 wav file."""
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM wav files are supported")
        rate, channels = wav.getframerate(), wav.getnchannels()
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1).astype(np.int16)
    return samples, rate


def last_speech_sample(samples: np.ndarray, rate: int, floor_db: float = -35.0) -> int:
    """End of the last 10 ms frame whose energy is within ``floor_db`` of the loudest."""
    hop = rate // 100
    frames = samples[: len(samples) // hop * hop].astype(np.float32).reshape(-1, hop)
    if not len(frames):
        return len(samples)
    rms = np.sqrt((frames**2).mean(axis=1))
    threshold = max(rms.max() * 10 ** (floor_db / 20), 100.0)
    loud = np.flatnonzero(rms >= threshold)
    return int((loud[-1] + 1) * hop) if len(loud) else len(samples)


@dataclass
class CallResult:
    events: list[dict[str, Any]] = field(default_factory=list)
    # Monotonic receive time of each event, parallel to ``events``.
    received_at: list[float] = field(default_factory=list)
    speech_end_sent_at: float | None = None
    closed_cleanly: bool = False

    def first(self, event_type: str, after: float | None = None) -> tuple[dict, float] | None:
        for event, at in zip(self.events, self.received_at, strict=True):
            if event["type"] == event_type and (after is None or at >= after):
                return event, at
        return None

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "summary", "events": len(self.events)}
        finals = [e["text"] for e in self.events if e["type"].endswith("transcription.completed")]
        out["transcript"] = " ".join(t for t in finals if t)
        errors = [e["code"] for e in self.events if e["type"] == "error"]
        if errors:
            out["errors"] = errors
        start = self.speech_end_sent_at
        if start is not None:
            for name, event_type in _SUMMARY_STAGES.items():
                hit = self.first(event_type, after=start)
                if hit:
                    out[f"speech_end_to_{name}_ms"] = round((hit[1] - start) * 1000, 1)
        metrics = [e for e in self.events if e["type"] == "turn.metrics"]
        if metrics:
            out["server_latency_ms"] = metrics[-1]["latency_ms"]
        return out


_SUMMARY_STAGES = {
    "speech_stopped": "input_audio_buffer.speech_stopped",
    "final_transcript": "input_audio_transcription.completed",
    "understanding": "understanding",
    "first_response_delta": "response.text.delta",
    "response_done": "response.done",
}


async def run_call(
    url: str,
    *,
    audio: np.ndarray | None = None,
    rate: int = 16_000,
    texts: tuple[str, ...] = (),
    codec: str = "pcm16",
    customer_id: str = "cust-001",
    token: str | None = None,
    fast: bool = False,
    tail_silence_s: float = 1.5,
    on_event: Any = None,
    timeout_s: float = 60.0,
) -> CallResult:
    """One call: stream ``audio`` (int16 at ``rate``) and/or typed ``texts``, then end."""
    result = CallResult()
    async with asyncio.timeout(timeout_s), connect(url, max_size=2**22, compression=None) as ws:

        async def receive() -> None:
            async for message in ws:
                event = orjson.loads(message)
                result.events.append(event)
                result.received_at.append(time.monotonic())
                if on_event:
                    on_event(event)
                if event["type"] == "session.ended":
                    result.closed_cleanly = True

        reader = asyncio.create_task(receive())
        start = {
            "type": "session.start",
            "protocol": 1,
            "sample_rate": rate,
            "codec": codec,
            "customer_id": customer_id,
            "token": token,
        }
        await ws.send(orjson.dumps(start).decode())
        for text in texts:
            await ws.send(orjson.dumps({"type": "input_text", "text": text}).decode())
        if audio is not None:
            await _stream_audio(ws, audio, rate, codec, fast, tail_silence_s, result)
        await ws.send(orjson.dumps({"type": "session.end"}).decode())
        await reader
    return result


async def _stream_audio(
    ws: Any,
    audio: np.ndarray,
    rate: int,
    codec: str,
    fast: bool,
    tail_s: float,
    result: CallResult,
) -> None:
    speech_end = last_speech_sample(audio, rate)
    padded = np.concatenate([audio, np.zeros(int(tail_s * rate), dtype=np.int16)])
    step = rate * FRAME_MS // 1000
    began = time.monotonic()
    for index, offset in enumerate(range(0, len(padded), step)):
        frame = padded[offset : offset + step]
        await ws.send(mulaw_encode(frame) if codec == "mulaw" else array_to_pcm16(frame))
        if result.speech_end_sent_at is None and offset + len(frame) >= speech_end:
            result.speech_end_sent_at = time.monotonic()
        if not fast:
            # Pace against the start time, not frame by frame, so sleeps do not drift.
            delay = began + (index + 1) * FRAME_MS / 1000 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m clients.call",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("wav", nargs="?", type=Path, help="16-bit PCM wav file (any rate)")
    parser.add_argument("--url", default="ws://127.0.0.1:8765", help="server URL")
    parser.add_argument("--fast", action="store_true", help="send audio as fast as possible")
    parser.add_argument("--text", action="append", default=[], help="typed turn (repeatable)")
    parser.add_argument("--rate", type=int, default=16_000, help="sample rate to send at")
    parser.add_argument("--codec", choices=("pcm16", "mulaw"), default="pcm16")
    parser.add_argument("--customer", default="cust-001", help="customer id of the caller")
    parser.add_argument("--token", default=None, help="session token")
    parser.add_argument(
        "--tail-silence", type=float, default=1.5, help="seconds of silence sent after the file"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after this long")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.wav is None and not args.text:
        _parser().error("give a wav file, --text, or both")
    audio = None
    if args.wav is not None:
        samples, file_rate = read_wav(args.wav)
        audio = resample(samples, file_rate, args.rate)

    def show(event: dict[str, Any]) -> None:
        print(orjson.dumps(event).decode(), flush=True)

    try:
        result = asyncio.run(
            run_call(
                args.url,
                audio=audio,
                rate=args.rate,
                texts=tuple(args.text),
                codec=args.codec,
                customer_id=args.customer,
                token=args.token,
                fast=args.fast,
                tail_silence_s=args.tail_silence,
                on_event=show,
                timeout_s=args.timeout,
            )
        )
    except (OSError, TimeoutError) as exc:
        print(f"call failed: {exc!r}", file=sys.stderr)
        return 1
    show(result.summary())
    return 0 if result.closed_cleanly and "errors" not in result.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
