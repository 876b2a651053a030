"""`python -m agent.understanding`: JSON lines in, one JSON line out per input, in order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(lines: list[str], *args: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "agent.understanding", *args],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_cli_lines_in_order_with_errors_kept() -> None:
    payees = [{"id": "p1", "name": "Ken Sato"}, {"id": "p2", "name": "Hiroshi Saito"}]
    lines = [
        json.dumps(
            {"id": "a", "text": "send five thousand yen to ken satoh tomorrow", "payees": payees}
        ),
        json.dumps({"id": "b", "text": "what's my balance"}),
        "this is not json",
        json.dumps({"id": "c", "text": "I still haven't received my new card"}),
        json.dumps(
            {
                "id": "d",
                "text": "pay forty two fifty to hiroshi saitou on the fifth",
                "payees": payees,
                "now": "2022-06-10T12:00:00",
            }
        ),
        json.dumps({"id": "e", "text": 42}),
        json.dumps({"id": "f", "text": "yes"}),
        json.dumps({"id": "g"}),
    ]
    out = run_cli(lines, "--now", "2022-03-15T09:00:00")
    assert len(out) == len(lines)
    a, b, bad, c, d, e, f, g = out
    assert a["id"] == "a" and a["intent"] == "transfer_money"
    assert a["entities"]["amount"] == {"minor": 5000, "currency": "JPY"}
    assert a["entities"]["date"] == "2022-03-16"
    assert a["entities"]["person"] == "ken satoh"
    assert a["entities"]["recipient_candidates"][0] == {"id": "p1", "score": 1.0}
    assert a["needs_confirmation"] is True and a["path"] == "fast" and a["topic"] is None
    assert isinstance(a["trace"], list) and a["trace"]
    assert b["intent"] == "check_balance" and b["entities"] == {}
    assert "error" in bad and bad["id"] is None
    assert c["intent"] == "faq" and c["topic"] == "card_arrival"
    assert d["entities"]["date"] == "2022-07-05"  # per-line now wins over --now
    assert d["entities"]["amount"]["minor"] == 4250
    assert d["entities"]["recipient_candidates"][0]["id"] == "p2"
    assert e["id"] == "e" and "error" in e
    assert f["intent"] == "confirm"
    assert g["intent"] == "out_of_scope" and g["ambiguity_reason"] == "empty_input"


def test_cli_output_keys() -> None:
    (out,) = run_cli([json.dumps({"id": 7, "text": "lock my card ending one two three four"})])
    assert set(out) == {
        "id",
        "intent",
        "confidence",
        "topic",
        "entities",
        "needs_confirmation",
        "ambiguity_reason",
        "path",
        "trace",
    }
    assert out["id"] == 7
    assert out["entities"]["account_ref"] == "1234"
