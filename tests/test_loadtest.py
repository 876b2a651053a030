"""The load test: bots against a real server (slow), and the report's bookkeeping (fast).

The slow test runs the command a user runs - ``python -m loadtest run`` in a child
process, which starts its own servers (decomposed and the sequential baseline) - with
two callers for a few seconds, then checks that the report adds up: every scripted turn
of every call has one status, counts match the per-turn records, percentiles are
ordered, and caller-side stages arrive in protocol order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from clients.local_server import PROJECT_ROOT
from loadtest.__main__ import rereport
from loadtest.bot import CALL_STATUSES, CLIENT_STAGES, TURN_STATUSES, CallRecord, TurnRecord
from loadtest.conversations import SCRIPTS, conversations
from loadtest.html import render
from loadtest.report import build_report, percentiles
from loadtest.runner import LevelResult, Mode


def _check_table(table: dict) -> None:
    for stage, stats in table.items():
        if stats["n"]:
            assert stats["min"] <= stats["p50"] <= stats["p95"] <= stats["p99"] <= stats["max"], (
                stage,
                stats,
            )


def check_report(report: dict) -> None:
    """Consistency of a report, whatever the numbers."""
    for level in report["levels"]:
        calls, turns = level["calls"], level["turns"]
        assert calls["started"] == sum(calls[s] for s in CALL_STATUSES), calls
        assert turns["scripted"] == sum(turns[s] for s in TURN_STATUSES), turns
        records = [
            t
            for t in report["turns"]
            if t["mode"] == level["mode"] and t["concurrency"] == level["concurrency"]
        ]
        assert len(records) == turns["scripted"]
        assert all(t["status"] in TURN_STATUSES for t in records)
        # Each call has every turn of its script, once.
        by_call: dict[int, list[dict]] = {}
        for t in records:
            by_call.setdefault(t["call"], []).append(t)
        assert len(by_call) == calls["started"]
        for call_turns in by_call.values():
            script = SCRIPTS[call_turns[0]["conversation"]]
            assert sorted(t["index"] for t in call_turns) == list(range(len(script)))
        for key in ("client_ms", "server_ms"):
            _check_table(level[key])
            for stats in level[key].values():
                assert stats["n"] <= turns["ok"]
        for table in level["by_path"].values():
            _check_table(table)


def test_percentiles_are_ordered_and_empty_is_explicit() -> None:
    stats = percentiles([5.0, 1.0, 100.0, 7.0, 3.0])
    assert stats["n"] == 5 and stats["min"] == 1.0 and stats["max"] == 100.0
    assert stats["p50"] == 5.0 <= stats["p95"] <= stats["p99"] <= 100.0
    assert percentiles([]) == {"n": 0}


def test_report_accounts_for_every_turn() -> None:
    """Bookkeeping on hand-made records: ok, timed-out and cancelled turns all counted."""
    script = conversations(["transfer_confirm"])[0]
    calls = []
    for number, statuses in enumerate((("ok", "ok"), ("ok", "timeout"), ("cancelled",) * 2)):
        call = CallRecord(call=number, conversation=script.name, started_at=0.0)
        for index, status in enumerate(statuses):
            turn = TurnRecord(number, script.name, index, "x.wav", "transfer_money")
            turn.status = status
            if status == "ok":
                turn.client_ms = {
                    stage: 100.0 * number + i for i, stage in enumerate(CLIENT_STAGES)
                }
                turn.intent, turn.path = "transfer_money", "fast"
            call.turns.append(turn)
        call.status = "cancelled" if number == 2 else "completed"
        calls.append(call)
    result = LevelResult("decomposed", 3, 5.0, 6.0, calls, {}, 0.1)
    report = build_report(
        [result], [Mode("decomposed")], target_ms=500, cores=2, command="test", options={}
    )
    check_report(report)
    level = report["levels"][0]
    assert level["turns"]["ok"] == 3 and level["turns"]["timeout"] == 1
    assert level["turns"]["cancelled"] == 2 and level["calls"]["cancelled"] == 1
    assert level["client_ms"]["understanding"]["n"] == 3
    # 3 of 6 turns failed: the level cannot pass, whatever the latency.
    assert report["summary"]["max_concurrency_under_target"] == 0
    page = render(report)
    assert page.startswith("<!doctype html>") and page.count("<svg") == 3  # no CPU samples


def _level(mode: str, concurrency: int, understanding_ms: float) -> LevelResult:
    script = conversations(["balance"])[0]
    calls = []
    for number in range(10):
        call = CallRecord(call=number, conversation=script.name, started_at=0.0)
        turn = TurnRecord(number, script.name, 0, "balance_02.wav", "check_balance")
        turn.status, turn.intent, turn.path = "ok", "check_balance", "fast"
        turn.client_ms = {stage: understanding_ms + number for stage in CLIENT_STAGES}
        call.turns.append(turn)
        call.status = "completed"
        calls.append(call)
    return LevelResult(mode, concurrency, 5.0, 6.0, calls, {"cpu_cores_avg": 0.5}, 0.1)


def test_capacity_ratio_and_rejudging_a_stored_report(tmp_path: Path) -> None:
    results = [
        _level("decomposed", 1, 400),
        _level("sequential", 1, 700),
        _level("decomposed", 5, 600),
        _level("sequential", 5, 800),
    ]
    modes = [Mode("decomposed"), Mode("sequential")]
    report = build_report(results, modes, target_ms=500, cores=2, command="test", options={})
    check_report(report)
    summary = report["summary"]
    assert summary["max_concurrency_under_target"] == 1 and summary["calls_per_core"] == 0.5
    ratio = summary["ratios"][0]
    assert ratio["concurrency"] == 1 and ratio["understanding_p50_ratio"] == round(404.5 / 704.5, 3)
    (tmp_path / "report.json").write_bytes(orjson.dumps(report))
    assert rereport(tmp_path, 700.0) == 0
    again = orjson.loads((tmp_path / "report.json").read_bytes())
    assert again["summary"]["max_concurrency_under_target"] == 5
    assert again["summary"]["calls_per_core"] == 2.5
    assert (tmp_path / "report.html").read_text().count("<svg") == 4


@pytest.mark.slow
def test_bots_against_a_real_server(tmp_path: Path) -> None:
    out = tmp_path / "report"
    command = [
        sys.executable,
        "-m",
        "loadtest",
        "run",
        "--calls",
        "2",
        "--duration",
        "3",
        "--jitter",
        "0.5",
        "--conversations",
        "transfer_confirm,balance,card_lock",
        "--out",
        str(out),
    ]
    done = subprocess.run(
        command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=110, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = orjson.loads((out / "report.json").read_bytes())
    check_report(report)
    assert [lv["mode"] for lv in report["levels"]] == ["decomposed", "sequential"]
    for level in report["levels"]:
        assert level["calls"]["started"] >= 2
        assert level["turns"]["ok"] == level["turns"]["scripted"], level["turns"]
        assert level["calls"]["completed"] == level["calls"]["started"]
        assert level["client_ms"]["understanding"]["n"] == level["turns"]["ok"]
        assert level["server_process"]["cpu_cores_avg"] > 0
        assert level["server_process"]["rss_mib_peak"] > 50
    for turn in report["turns"]:
        times = [turn["client_ms"][s] for s in CLIENT_STAGES]
        assert times == sorted(times), turn
        assert turn["server_ms"]["understanding_ready"] >= 0
    summary = report["summary"]
    assert summary["cores"] >= 1 and summary["calls_per_core"] is not None
    ratio = summary["ratios"][0]
    assert ratio["concurrency"] == 2 and ratio["understanding_p50_ratio"] > 0
    assert (out / "report.html").read_text().startswith("<!doctype html>")
