"""Understanding overlapped with ASR partials, and the adaptive end-of-turn signal."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path

from agent.understanding import PartialTracker, Payee, Understander

NOW = datetime(2022, 3, 15, 9, 0)
PAYEES = [Payee("p1", "Ken Sato"), Payee("p2", "Hiroshi Saito")]
ROOT = Path(__file__).resolve().parents[1]


def test_final_equal_to_last_partial_is_served_from_cache() -> None:
    nlu = Understander.load()
    tracker = PartialTracker(nlu, payees=PAYEES, now=NOW)
    words = "send fifty pounds to ken satoh".split()
    states = []
    for k in range(1, len(words) + 1):
        partial = " ".join(words[:k])
        assert tracker.update(partial) is not None
        states.append(tracker.completeness(partial))
    assert tracker.update("send fifty pounds to ken satoh") is None  # nothing new
    assert states[3] == "incomplete"  # "send fifty pounds to"
    assert states[-1] == "complete"
    last = tracker.update("send fifty pounds to ken satoh  ")
    assert last is None
    final = tracker.final("Send fifty pounds to Ken Satoh")
    assert final.intent == "transfer_money"
    assert final.entities["recipient_candidates"][0]["id"] == "p1"
    assert tracker.final("send fifty pounds to ken satoh") is final
    assert tracker.partials_understood == len(words)


def test_revised_final_is_understood_afresh() -> None:
    tracker = PartialTracker(Understander.load(), payees=PAYEES, now=NOW)
    tracker.update("send fifty pounds to ken")
    u = tracker.final("send fifteen pounds to ken sato")
    assert u.entities["amount"] == {"minor": 1500, "currency": "GBP"}


def test_benchmark_script_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "tools/bench_understanding.py", "--rounds", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "overlapped with partials, final = last partial" in proc.stdout
    assert "mean wait after the last word, adaptive" in proc.stdout


def test_completeness_from_an_existing_understanding() -> None:
    nlu = Understander.load()
    for text in [
        "send fifty pounds to ken sato",
        "send fifty pounds to",
        "what's my balance",
        "send fifty pounds",
        "how long does a transfer take",
    ]:
        u = nlu.understand(text, payees=PAYEES, now=NOW)
        assert nlu.completeness(text, u) == nlu.turn_completeness(text, payees=PAYEES), text
