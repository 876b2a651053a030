"""The embedded SQLite bank on a real file: seeding, idempotent actions, the audit log,
its own checks, pending read-backs, and crashes at each fault point (a child process
killed with SIGKILL)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from agent.bank.backend import Action, Money, PendingRecord, action_id
from agent.bank.directory import SEED_PATH
from agent.bank.sqlite import SQLiteBank
from clients.local_server import PROJECT_ROOT

SEND = Action("transfer", "cust-001", "acc-001-jpy", "p-ken-sato", Money(5000, "JPY"))


def opening_balances() -> dict[str, int]:
    seed = orjson.loads(SEED_PATH.read_bytes())
    return {a["id"]: a["balance_minor"] for c in seed["customers"] for a in c["accounts"]}


def check_ledger(path: Path) -> dict[str, int]:
    """Audit log, actions, transactions and balances agree; returns money sent per account.

    Every executed action has exactly one ``executed`` audit entry, one ``actions`` row and
    (money) one transaction row; every intent has exactly one outcome; each balance is its
    opening balance less what the executed actions took."""
    db = sqlite3.connect(path)
    try:
        executed = db.execute(
            "SELECT action_id, COUNT(*) FROM audit WHERE event = 'executed' GROUP BY action_id"
        ).fetchall()
        assert all(n == 1 for _, n in executed), executed
        actions = dict(db.execute("SELECT action_id, account_id FROM actions").fetchall())
        assert {a for a, _ in executed} == set(actions)
        for aid, account in actions.items():
            if account is not None:
                rows = db.execute(
                    "SELECT COUNT(*) FROM transactions WHERE action_id = ?", (aid,)
                ).fetchone()
                assert rows[0] == 1, aid
        intents = db.execute(
            """SELECT a.action_id, (SELECT COUNT(*) FROM audit b WHERE b.action_id = a.action_id
               AND b.seq > a.seq AND b.event IN ('executed', 'refused', 'interrupted')
               AND NOT EXISTS (SELECT 1 FROM audit c WHERE c.action_id = a.action_id
                               AND c.event = 'intent' AND a.seq < c.seq AND c.seq < b.seq))
               FROM audit a WHERE a.event = 'intent'"""
        ).fetchall()
        assert all(n == 1 for _, n in intents), intents
        sent = dict(
            db.execute(
                "SELECT account_id, SUM(amount_minor) FROM actions"
                " WHERE account_id IS NOT NULL GROUP BY account_id"
            ).fetchall()
        )
        balances = dict(db.execute("SELECT id, balance_minor FROM accounts").fetchall())
        for account, opening in opening_balances().items():
            assert balances[account] == opening - sent.get(account, 0), account
        return sent
    finally:
        db.close()


def events(bank: SQLiteBank) -> list[str]:
    return [e.event for e in bank.audit_log()]


@pytest.fixture
def bank(tmp_path: Path):
    bank = SQLiteBank(tmp_path / "bank.sqlite3")
    yield bank
    bank.close()


def test_first_start_seeds_the_file_once(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "bank.sqlite3"
    bank = SQLiteBank(path)
    assert [a.id for a in bank.accounts("cust-001")] == [
        "acc-001-gbp",
        "acc-001-sav",
        "acc-001-jpy",
    ]
    assert {p.kind for p in bank.payees("cust-001")} == {"person"}
    assert bank.billers("cust-001")[0].name == "City Power electricity"
    assert bank.cards("cust-002")[0].last4 == "9876"
    assert bank.recent_transactions("cust-001", limit=2)[0].description == "Daily Grind coffee"
    bank.execute("act-1", SEND, call_id="c", turn=1)
    bank.close()
    again = SQLiteBank(path)  # not seeded twice: the transfer is still there
    assert again.accounts("cust-001")[2].balance_minor == 245000
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert again._conn().execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    again.close()


def test_an_action_runs_once_per_action_id(bank: SQLiteBank, tmp_path: Path) -> None:
    aid = action_id("call-1/x", 3, SEND)
    first = bank.execute(aid, SEND, call_id="call-1", turn=4)
    assert first.status == "executed" and not first.duplicate
    assert first.balance_after_minor == 245000
    again = bank.execute(aid, SEND, call_id="call-2", turn=1)  # a retry, a reconnect
    assert again.status == "executed" and again.duplicate
    assert again.balance_after_minor == 245000
    assert bank.accounts("cust-001")[2].balance_minor == 245000
    assert events(bank) == ["intent", "executed", "duplicate"]
    assert bank.recent_transactions("cust-001", limit=1)[0].description == "Transfer to Ken Sato"
    assert check_ledger(tmp_path / "bank.sqlite3") == {"acc-001-jpy": 5000}


def test_the_banks_own_checks_refuse_and_audit(bank: SQLiteBank) -> None:
    other = Action("transfer", "cust-001", "acc-001-jpy", "p2-taro-yamamoto", Money(5000, "JPY"))
    assert bank.execute("a1", other, call_id="c", turn=1).reason_code == "unknown_payee"
    theirs = Action("transfer", "cust-001", "acc-002-jpy", "p-ken-sato", Money(5000, "JPY"))
    assert bank.execute("a2", theirs, call_id="c", turn=1).reason_code == "unknown_account"
    too_much = Action("transfer", "cust-001", "acc-001-jpy", "p-ken-sato", Money(250001, "JPY"))
    assert bank.execute("a3", too_much, call_id="c", turn=1).reason_code == "insufficient_funds"
    negative = Action("transfer", "cust-001", "acc-001-gbp", "p-john-smith", Money(-100, "GBP"))
    assert bank.execute("a4", negative, call_id="c", turn=1).reason_code == "non_positive_amount"
    big = Action("transfer", "cust-001", "acc-001-gbp", "p-john-smith", Money(150000, "GBP"))
    assert bank.execute("a5", big, call_id="c", turn=1).status == "executed"
    more = Action("transfer", "cust-001", "acc-001-gbp", "p-john-smith", Money(60000, "GBP"))
    assert bank.execute("a6", more, call_id="c", turn=1).reason_code == "daily_limit"
    foreign_card = Action("lock_card", "cust-001", card_id="card-002")
    assert bank.execute("a7", foreign_card, call_id="c", turn=1).reason_code == "unknown_card"
    refused = [e for e in bank.audit_log() if e.event == "refused"]
    assert [e.reason for e in refused] == [
        "unknown_payee",
        "unknown_account",
        "insufficient_funds",
        "non_positive_amount",
        "daily_limit",
        "unknown_card",
    ]
    assert bank.accounts("cust-002")[0].balance_minor == 830000


def test_a_day_later_the_daily_limit_is_fresh(tmp_path: Path) -> None:
    clock = [datetime(2026, 11, 30, 23, 0, tzinfo=UTC)]
    bank = SQLiteBank(tmp_path / "b.sqlite3", now=lambda: clock[0])
    send = Action("transfer", "cust-001", "acc-001-gbp", "p-john-smith", Money(150000, "GBP"))
    assert bank.execute("d1", send, call_id="c", turn=1).status == "executed"
    assert bank.customer_view("cust-001").spent_today["acc-001-gbp"] == 150000
    assert bank.execute("d2", send, call_id="c", turn=2).reason_code == "daily_limit"
    clock[0] += timedelta(hours=2)
    assert bank.customer_view("cust-001").spent_today["acc-001-gbp"] == 0
    assert bank.execute("d3", send, call_id="c", turn=3).status == "executed"
    bank.close()


def test_cards_lock_and_unlock(bank: SQLiteBank) -> None:
    lock = Action("lock_card", "cust-001", card_id="card-001")
    assert bank.execute("l1", lock, call_id="c", turn=1).status == "executed"
    assert bank.cards("cust-001")[0].locked
    assert bank.execute("l2", lock, call_id="c", turn=2).reason_code == "card_already_locked"
    unlock = Action("unlock_card", "cust-001", card_id="card-001")
    assert bank.execute("l3", unlock, call_id="c", turn=3).status == "executed"
    assert not bank.cards("cust-001")[0].locked


def test_a_bill_payment_reduces_the_amount_due(bank: SQLiteBank) -> None:
    pay = Action("bill_payment", "cust-001", "acc-001-gbp", "b-aqua-water", Money(3180, "GBP"))
    assert bank.execute("b1", pay, call_id="c", turn=1).balance_after_minor == 523450 - 3180
    water = next(b for b in bank.billers("cust-001") if b.id == "b-aqua-water")
    assert water.amount_due_minor == 0


def test_pending_read_backs_expire_and_record_execution(tmp_path: Path) -> None:
    clock = [datetime(2026, 11, 30, 9, 0, tzinfo=UTC)]
    bank = SQLiteBank(tmp_path / "b.sqlite3", now=lambda: clock[0])
    record = PendingRecord(
        "cust-001", "act-p", SEND, "Send 5,000 yen to Ken Sato?", "call-1", "awaiting",
        "2026-11-30T09:02:00.000Z",
    )  # fmt: skip
    bank.save_pending(record)
    assert bank.load_pending("cust-001") == record
    assert bank.load_pending("cust-002") is None
    bank.execute("act-p", SEND, call_id="call-1", turn=2)
    loaded = bank.load_pending("cust-001")
    assert loaded is not None and loaded.status == "executed"
    clock[0] += timedelta(minutes=3)
    assert bank.load_pending("cust-001") is None
    bank.save_pending(_replace(record))
    bank.clear_pending("cust-001", call_id="call-2", turn=1)
    assert events(bank)[-1] == "cancelled"
    bank.close()


def _replace(record: PendingRecord) -> PendingRecord:
    return PendingRecord(
        record.customer_id, "act-q", record.action, record.readback, record.call_id,
        "awaiting", "2099-01-01T00:00:00.000Z",
    )  # fmt: skip


_CRASH = """
import sys
from agent.bank.backend import Action, Money
from agent.bank.sqlite import SQLiteBank
bank = SQLiteBank(sys.argv[1])
send = Action("transfer", "cust-001", "acc-001-jpy", "p-ken-sato", Money(5000, "JPY"))
bank.execute("act-crash", send, call_id="call-1", turn=2)
print("survived")
"""


@pytest.mark.parametrize(
    ("point", "after_restart"),
    [
        ("after_intent", ["intent", "interrupted"]),
        ("before_commit", ["intent", "interrupted"]),
        ("after_commit", ["intent", "executed"]),
    ],
)
def test_a_crash_at_any_point_leaves_nothing_half_done(
    tmp_path: Path, point: str, after_restart: list[str]
) -> None:
    path = tmp_path / "bank.sqlite3"
    SQLiteBank(path).close()
    child = subprocess.run(
        [sys.executable, "-c", _CRASH, str(path)],
        cwd=PROJECT_ROOT,
        env={"AGENT_BANK_FAULT": point, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == -9, child.stderr  # SIGKILL: no cleanup ran
    bank = SQLiteBank(path)  # the restart
    assert events(bank) == after_restart
    assert bank.interrupted == (["act-crash"] if after_restart[-1] == "interrupted" else [])
    sent = check_ledger(path)
    assert sent == ({"acc-001-jpy": 5000} if point == "after_commit" else {})
    # The caller says yes again under the same action id: it runs once in all.
    outcome = bank.execute("act-crash", SEND, call_id="call-2", turn=1)
    assert outcome.status == "executed" and outcome.duplicate == (point == "after_commit")
    assert check_ledger(path) == {"acc-001-jpy": 5000}
    bank.close()


def test_recovery_waits_while_another_process_uses_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bank.sqlite3"
    first = SQLiteBank(path)
    with first._tx(first._conn()):
        first._audit(first._conn(), "cust-001", "c", 1, "act-live", "intent", "transfer", "{}")
    second = SQLiteBank(path)  # the first is alive: its intent may be in flight
    assert second.interrupted == [] and events(second) == ["intent"]
    second.close()
    first.close()
    third = SQLiteBank(path)
    assert third.interrupted == ["act-live"]
    third.close()
