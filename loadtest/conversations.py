"""Scripted conversations made of the committed speech fixtures (tests/fixtures/speech).

A conversation is what one bot says during one call, turn by turn; the bot waits for
the server's reply to a turn (``response.done`` and ``turn.metrics``) before it speaks
the next one, as a caller answering "yes" to a read-back would. The mix covers the
single-shot commands, open questions and the multi-turn flows (transfer -> confirm or
deny, an ambiguous payee -> the full command -> confirm).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import orjson

from clients.call import last_speech_sample, read_wav
from protocol.codecs import resample

SPEECH = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "speech"
RATE = 16_000


@dataclass(frozen=True)
class Utterance:
    audio: str  # file name under tests/fixtures/speech
    transcript: str
    label: str  # expected intent, e.g. "transfer_money:ambiguous"
    samples: np.ndarray  # int16 at 16 kHz
    speech_end: int  # index just past the last speech sample (what the bot times from)

    @property
    def intent(self) -> str:
        return self.label.split(":", 1)[0]


@dataclass(frozen=True)
class Conversation:
    name: str
    turns: tuple[Utterance, ...]


# name -> fixture files, spoken in order. Multi-turn ones carry a confirmation.
SCRIPTS: dict[str, tuple[str, ...]] = {
    "transfer_confirm": ("transfer_01.wav", "yes_01.wav"),
    "transfer_deny": ("transfer_02.wav", "no_01.wav"),
    "transfer_clarify": ("transfer_ambiguous.wav", "transfer_03.wav", "espeak_yes_01.wav"),
    "transfer_tomorrow": ("transfer_05.wav", "yes_01.wav"),
    "pay_bill_confirm": ("bill_01.wav", "yes_01.wav"),
    "pay_bill_cancel": ("bill_02.wav", "cancel_01.wav"),
    "balance_then_transactions": ("balance_01.wav", "transactions_01.wav"),
    "balance": ("balance_02.wav",),
    "spending": ("transactions_02.wav",),
    "lost_card": ("espeak_card_lock_01.wav", "yes_01.wav"),
    "card_lock": ("card_lock_01.wav",),
    "card_unlock": ("card_unlock_01.wav",),
    "branch_hours": ("faq_02.wav",),
    "fees": ("faq_03.wav",),
    "handoff": ("handoff_01.wav",),
    "off_topic": ("off_topic_01.wav", "espeak_handoff_01.wav"),
}


@cache
def fixtures() -> dict[str, dict]:
    lines = (SPEECH / "transcripts.jsonl").read_text().splitlines()
    rows = [orjson.loads(line) for line in lines if line.strip()]
    return {row["audio"]: row for row in rows}


@cache
def utterance(audio: str) -> Utterance:
    row = fixtures().get(audio, {"transcript": "", "label": "unknown"})
    samples, rate = read_wav(SPEECH / audio)
    if rate != RATE:
        samples = resample(samples, rate, RATE)
    return Utterance(
        audio=audio,
        transcript=row["transcript"],
        label=row["label"],
        samples=samples,
        speech_end=last_speech_sample(samples, RATE),
    )


def conversations(names: list[str] | None = None) -> list[Conversation]:
    chosen = names or list(SCRIPTS)
    unknown = [n for n in chosen if n not in SCRIPTS]
    if unknown:
        raise ValueError(f"unknown conversation(s) {unknown}; known: {sorted(SCRIPTS)}")
    return [Conversation(n, tuple(utterance(a) for a in SCRIPTS[n])) for n in chosen]
