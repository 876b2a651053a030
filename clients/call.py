"""Put a call through the server from a wav file (or typed text) and time it.

    python -m clients.call FILE.wav [--url ws://127.0.0.1:8765] [--fast]
    python -m clients.call --text "what's my balance"
    python -m clients.call --text "send 5000 yen to Ken Sato" --text "yes"   # a conversation

Streams the file in 20 ms frames at real-time pace (``--fast``: as fast as the socket
takes it), followed by trailing silence so the server's endpointer can end the turn,
then ``session.end``. Every server event is printed as one JSON line; the last line is a
summary of latencies measured from the caller's side, starting at the moment the frame
holding the file's last speech sample was sent.

Several ``--text`` turns make one conversation: each is sent once the reply to the one
before is done (:func:`run_conversation` also takes audio turns).

Identity: the session needs a signed token (``python -m agent token --customer ID``).
Without ``--token`` the client mints a development token itself with the secret of the
local configuration (configs/agent.toml, or ``AGENT_AUTH_SECRET``): convenient against
a local server, useless against a server with a real secret.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from agent.auth import mint
from agent.config import load_config
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

    def replies(self) -> list[str]:
        """The text of each completed reply, in order."""
        return [e["text"] for e in self.events if e["type"] == "response.done"]

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


def dev_token(customer_id: str) -> str:
    """A token signed with the local configuration's secret (development servers)."""
    config = load_config()
    return mint(customer_id, config.auth.secret, ttl_s=config.auth.token_ttl_s)


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
    """One call: stream ``audio`` (int16 at ``rate``) and/or typed ``texts``, then end.

    Without a ``token`` one is minted with the local secret (see :func:`dev_token`);
    ``token=""`` sends none."""
    result = CallResult()
    if token is None:
        token = dev_token(customer_id)
    async with asyncio.timeout(timeout_s), connect(url, max_size=2**22, compression=None) as ws:

        async def receive() -> None:
            with contextlib.suppress(ConnectionClosed):  # the events say why it closed
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
            "token": token or None,
        }
        try:
            await ws.send(orjson.dumps(start).decode())
            for text in texts:
                await ws.send(orjson.dumps({"type": "input_text", "text": text}).decode())
            if audio is not None:
                await _stream_audio(ws, audio, rate, codec, fast, tail_silence_s, result)
            await ws.send(orjson.dumps({"type": "session.end"}).decode())
        except ConnectionClosed:
            pass  # the server closed the call (unauthorized, busy): see its error event
        await reader
    return result


Turn = str | np.ndarray  # typed text, or int16 audio at the call's rate


async def run_conversation(
    url: str,
    turns: list[Turn] | tuple[Turn, ...],
    *,
    rate: int = 16_000,
    codec: str = "pcm16",
    customer_id: str = "cust-001",
    token: str | None = None,
    fast: bool = True,
    tail_silence_s: float = 1.5,
    hang_up: bool = False,
    on_event: Any = None,
    turn_timeout_s: float = 60.0,
) -> CallResult:
    """Several turns in one session, each sent once the reply to the one before is done.

    A turn is done when every turn the server has opened so far has its ``turn.metrics``
    (or an ``error`` came). ``hang_up``: drop the connection right after sending the last
    turn, without ``session.end`` and without waiting for the reply (a dropped call).
    """
    result = CallResult()
    if token is None:
        token = dev_token(customer_id)
    changed = asyncio.Event()
    async with connect(url, max_size=2**22, compression=None) as ws:

        async def receive() -> None:
            try:
                async for message in ws:
                    event = orjson.loads(message)
                    result.events.append(event)
                    result.received_at.append(time.monotonic())
                    if on_event:
                        on_event(event)
                    if event["type"] == "session.ended":
                        result.closed_cleanly = True
                    changed.set()
            except ConnectionClosed:
                pass  # the server went away: what came before it is the result
            finally:
                changed.set()

        def settled(seen_before: int) -> bool:
            new = result.events[seen_before:]
            if any(e["type"] == "error" for e in new):
                return True
            opened = {e["turn"] for e in result.events if "turn" in e}
            done = {e["turn"] for e in result.events if e["type"] == "turn.metrics"}
            return any(e["type"] == "turn.metrics" for e in new) and opened <= done

        reader = asyncio.create_task(receive())
        try:
            start = {
                "type": "session.start",
                "protocol": 1,
                "sample_rate": rate,
                "codec": codec,
                "customer_id": customer_id,
                "token": token or None,
            }
            await ws.send(orjson.dumps(start).decode())
            for index, turn in enumerate(turns):
                seen = len(result.events)
                if isinstance(turn, str):
                    await ws.send(orjson.dumps({"type": "input_text", "text": turn}).decode())
                else:
                    await _stream_audio(ws, turn, rate, codec, fast, tail_silence_s, result)
                if hang_up and index == len(turns) - 1:
                    ws.transport.abort()  # no close handshake: the line just drops
                    return result
                async with asyncio.timeout(turn_timeout_s):
                    while not settled(seen):
                        if reader.done():
                            return result  # the server closed the call
                        changed.clear()
                        await changed.wait()
            await ws.send(orjson.dumps({"type": "session.end"}).decode())
            async with asyncio.timeout(turn_timeout_s):
                await reader
        finally:
            reader.cancel()
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
    parser.add_argument(
        "--token",
        default=None,
        help="session token (python -m agent token); default: a dev token from the local secret",
    )
    parser.add_argument(
        "--tail-silence", type=float, default=1.5, help="seconds of silence sent after the file"
    )
    parser.add_argument(
        "--twilio",
        action="store_true",
        help="call through the telephony bridge (Twilio Media Streams)",
    )
    parser.add_argument("--dtmf", default="", help="--twilio: keys to press after the audio")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after this long")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.wav is None and not args.text and not args.dtmf:
        _parser().error("give a wav file, --text, or both")
    audio = None
    if args.wav is not None:
        samples, file_rate = read_wav(args.wav)
        audio = resample(samples, file_rate, args.rate)

    def show(event: dict[str, Any]) -> None:
        print(orjson.dumps(event).decode(), flush=True)

    if args.twilio:
        return _twilio_main(args, audio)
    if len(args.text) > 1 and audio is None:
        return _conversation_main(args, show)
    result = _run(
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
    if result is None:
        return 1
    show(result.summary())
    return 0 if result.closed_cleanly and "errors" not in result.summary() else 1


def _run(call: Any) -> Any:
    """Run one call to the end; None, having said why, when it could not be made."""
    try:
        return asyncio.run(call)
    except (OSError, TimeoutError) as exc:
        print(f"call failed: {exc!r}", file=sys.stderr)
        return None


def _twilio_main(args: argparse.Namespace, audio: np.ndarray | None) -> int:
    """The same call over the telephony bridge: mu-law 8 kHz, spoken reply back."""
    from clients.twilio import run_twilio_call

    def show(message: dict[str, Any]) -> None:
        if message.get("event") == "media":  # audio: print its size, not its bytes
            size = len(message["media"]["payload"]) * 3 // 4
            message = {**message, "media": {"payload_bytes": size}}
        print(orjson.dumps(message).decode(), flush=True)

    utterances = [audio] if audio is not None else []
    result = _run(
        run_twilio_call(
            args.url,
            utterances,
            rate=args.rate,
            customer_id=args.customer,
            token=args.token,
            dtmf=args.dtmf,
            on_message=show,
            timeout_s=args.timeout,
        )
    )
    if result is None:
        return 1
    print(orjson.dumps(result.summary()).decode(), flush=True)
    return 0 if result.reply_audio else 1


def _conversation_main(args: argparse.Namespace, show: Any) -> int:
    """Typed turns as one conversation, each after the reply to the one before."""
    result = _run(
        run_conversation(
            args.url,
            args.text,
            customer_id=args.customer,
            token=args.token,
            on_event=show,
            turn_timeout_s=args.timeout,
        )
    )
    if result is None:
        return 1
    show(result.summary())
    return 0 if result.closed_cleanly and "errors" not in result.summary() else 1


if __name__ == "__main__":
    sys.exit(main())
