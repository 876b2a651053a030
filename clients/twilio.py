"""A telephony peer that speaks the Twilio Media Streams protocol, for tests and bots.

It plays the carrier's part: ``connected`` and ``start`` (with the caller's identity in
``customParameters``), then the audio as 20 ms mu-law 8 kHz ``media`` messages with
sequence numbers and timestamps, at real-time pace. It "plays" the audio the server sends
back at real-time speed, echoes each ``mark`` once the audio before it has played, and
honours ``clear`` (drops what has not played), as the carrier does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from clients.call import dev_token, last_speech_sample
from protocol.codecs import mulaw_decode, mulaw_encode, resample

RATE = 8_000
FRAME = RATE * 20 // 1000  # 20 ms


@dataclass
class TwilioResult:
    reply_audio: list[np.ndarray] = field(default_factory=list)  # mu-law decoded, 8 kHz
    marks: list[str] = field(default_factory=list)  # echoed back, i.e. heard
    clears: list[float] = field(default_factory=list)  # receive times
    first_media_at: list[float] = field(default_factory=list)  # first media after speech
    speech_end_sent_at: list[float] = field(default_factory=list)
    speech_start_sent_at: list[float] = field(default_factory=list)
    cleared_audio_s: float = 0.0  # reply audio dropped unplayed by clear (barge-in)

    @property
    def audio(self) -> np.ndarray:
        if not self.reply_audio:
            return np.zeros(0, dtype=np.int16)
        return np.concatenate(self.reply_audio)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "summary",
            "reply_audio_s": round(len(self.audio) / RATE, 2),
            "marks_heard": len(self.marks),
            "clears": len(self.clears),
            "cleared_audio_s": round(self.cleared_audio_s, 2),
        }
        firsts = [
            round((media - end) * 1000, 1)
            for end in self.speech_end_sent_at
            if (media := next((m for m in self.first_media_at if m >= end), None))
        ]
        if firsts:
            out["speech_end_to_first_audio_ms"] = firsts
        if self.clears and self.speech_start_sent_at:
            start = self.speech_start_sent_at[-1]
            clear = next((c for c in self.clears if c >= start), None)
            if clear:
                out["barge_in_to_clear_ms"] = round((clear - start) * 1000, 1)
        return out


class _Playback:
    """The carrier's playback queue: audio plays at real time, marks echo when reached."""

    def __init__(self, ws: ClientConnection, result: TwilioResult, sid: str) -> None:
        self._ws, self._result, self._sid = ws, result, sid
        self._end = 0.0  # when the queued audio finishes playing
        self._marks: list[asyncio.TimerHandle] = []
        self._sends: set[asyncio.Future[None]] = set()

    def media(self, payload: str) -> None:
        mulaw = base64.b64decode(payload)
        self._result.reply_audio.append(mulaw_decode(mulaw))
        self._end = max(self._end, time.monotonic()) + len(mulaw) / RATE

    def mark(self, name: str) -> None:
        delay = max(self._end - time.monotonic(), 0.0)
        loop = asyncio.get_running_loop()
        self._marks.append(loop.call_later(delay, self._echo, name))

    def _echo(self, name: str) -> None:
        self._result.marks.append(name)
        message = {"event": "mark", "streamSid": self._sid, "mark": {"name": name}}
        task = asyncio.ensure_future(self._send_quietly(orjson.dumps(message).decode()))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send_quietly(self, message: str) -> None:
        with contextlib.suppress(ConnectionClosed):  # the call may have ended meanwhile
            await self._ws.send(message)

    def idle_for(self) -> float:
        """Seconds since the queued audio finished playing (negative while playing)."""
        return time.monotonic() - self._end

    def clear(self) -> None:
        self._result.cleared_audio_s += max(self._end - time.monotonic(), 0.0)
        for handle in self._marks:
            handle.cancel()  # cleared audio is never heard: no echo for its marks
        self._marks.clear()
        self._end = time.monotonic()


async def run_twilio_call(
    url: str,
    utterances: list[np.ndarray],
    *,
    rate: int = 16_000,
    customer_id: str = "cust-001",
    token: str | None = None,
    dtmf: str = "",
    gap_s: float = 4.0,
    barge_in_after_s: float | None = None,
    reorder: bool = False,
    duplicate: bool = False,
    hang_up_after_s: float | None = None,
    on_message: Any = None,
    timeout_s: float = 60.0,
) -> TwilioResult:
    """Stream each utterance (int16 at ``rate``) followed by ``gap_s`` of silence, then
    press ``dtmf`` keys, then stop. With ``barge_in_after_s`` the next utterance starts
    that long after the first reply audio instead of after the gap."""
    result = TwilioResult()
    if token is None:
        token = dev_token(customer_id)
    sid, url = "MZ" + "0" * 30, url.rstrip("/") + "/twilio"
    rng = random.Random(7)
    async with asyncio.timeout(timeout_s), connect(url, compression=None) as ws:
        playback = _Playback(ws, result, sid)
        sequence = 0
        sent_ms = 0

        def numbered(event: dict[str, Any]) -> str:
            nonlocal sequence
            sequence += 1
            return orjson.dumps(
                {**event, "sequenceNumber": str(sequence), "streamSid": sid}
            ).decode()

        async def send(event: dict[str, Any]) -> None:
            await ws.send(numbered(event))

        async def receive() -> None:
            async for message in ws:
                data = orjson.loads(message)
                if on_message:
                    on_message(data)
                kind = data.get("event")
                if kind == "media":
                    now = time.monotonic()
                    if not result.first_media_at or (
                        result.speech_end_sent_at
                        and result.first_media_at[-1] < result.speech_end_sent_at[-1]
                    ):
                        result.first_media_at.append(now)
                    playback.media(data["media"]["payload"])
                elif kind == "mark":
                    playback.mark(data["mark"]["name"])
                elif kind == "clear":
                    result.clears.append(time.monotonic())
                    playback.clear()

        reader = asyncio.create_task(receive())
        await ws.send(
            orjson.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}).decode()
        )
        await send(
            {
                "event": "start",
                "start": {
                    "streamSid": sid,
                    "callSid": "CA" + "0" * 30,
                    "tracks": ["inbound"],
                    "customParameters": {
                        "customer_id": customer_id,
                        **({"token": token} if token else {}),
                    },
                    "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": RATE, "channels": 1},
                },
            }
        )
        began = time.monotonic()

        async def stream(samples: np.ndarray, until: float | None = None) -> None:
            """Send frames at real-time pace (shuffled/duplicated on request)."""
            nonlocal sent_ms
            frames = [samples[i : i + FRAME] for i in range(0, len(samples), FRAME)]
            batch: list[str] = []
            for frame in frames:
                if until is not None and time.monotonic() >= until:
                    return
                payload = base64.b64encode(mulaw_encode(frame)).decode()
                # Sequence numbers and timestamps are fixed when a frame is made, so a
                # shuffled batch arrives out of order, as on a jittery network.
                batch.append(
                    numbered(
                        {
                            "event": "media",
                            "media": {
                                "track": "inbound",
                                "chunk": str(sequence),
                                "timestamp": str(sent_ms),
                                "payload": payload,
                            },
                        }
                    )
                )
                sent_ms += len(frame) * 1000 // RATE
                if len(batch) == 3 or frame is frames[-1]:
                    if reorder:
                        rng.shuffle(batch)
                    for message in batch:
                        await ws.send(message)
                        if duplicate and rng.random() < 0.2:
                            await ws.send(message)
                    batch = []
                delay = began + sent_ms / 1000 - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)

        async def listen(since: float, limit_s: float = 15.0) -> None:
            """Keep the line open (sending silence) until the agent's reply after
            ``since`` has played out, as a caller waits for an answer."""
            give_up = time.monotonic() + limit_s
            frame = np.zeros(FRAME, dtype=np.int16)
            while time.monotonic() < give_up:
                answered = result.first_media_at and result.first_media_at[-1] >= since
                if answered and playback.idle_for() > 0.6:
                    return
                await stream(frame)

        deadline = None if hang_up_after_s is None else time.monotonic() + hang_up_after_s
        for index, utterance in enumerate(utterances):
            audio = resample(utterance, rate, RATE)
            speech_start = int(np.argmax(np.abs(audio) > 500)) if audio.any() else 0
            speech_end = last_speech_sample(audio, RATE)
            await stream(audio[:speech_start], deadline)
            result.speech_start_sent_at.append(time.monotonic())
            await stream(audio[speech_start:speech_end], deadline)
            result.speech_end_sent_at.append(time.monotonic())
            await stream(audio[speech_end:], deadline)
            if deadline is not None and time.monotonic() >= deadline:
                break
            silence = np.zeros(int(gap_s * RATE), dtype=np.int16)
            if barge_in_after_s is not None and index + 1 < len(utterances):
                # Wait for the reply to start, then talk over it.
                while (
                    not result.first_media_at
                    or result.first_media_at[-1] < result.speech_end_sent_at[-1]
                ):
                    await stream(silence[:FRAME])
                await stream(silence[: int(barge_in_after_s * RATE)])
            else:
                await stream(silence, deadline)
        if utterances and hang_up_after_s is None:
            await listen(result.speech_end_sent_at[-1])
        for digit in dtmf:
            await send({"event": "dtmf", "dtmf": {"track": "inbound_track", "digit": digit}})
        if dtmf:
            pressed = time.monotonic()
            await stream(np.zeros(int(gap_s * RATE), dtype=np.int16))
            await listen(pressed)
        await send({"event": "stop", "stop": {"accountSid": "AC", "callSid": "CA"}})
        await asyncio.sleep(0.2)
        await ws.close()
        reader.cancel()
    return result
