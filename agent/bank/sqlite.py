"""The embedded bank: one SQLite file, seeded from seed.json on first start.

Durability: WAL journal with ``synchronous=FULL``, so a committed transaction survives
a power cut, not only a process crash. Every write is one ``BEGIN IMMEDIATE``
transaction.

Executing an action (:meth:`SQLiteBank.execute`) takes two transactions:

1. the *intent* is written to the audit log and committed: the log shows the attempt
   even if the process dies next;
2. the checks (ownership, balance, daily limit), the balance change, the transaction
   row, the ``actions`` row keyed by the action id, the pending record's status and the
   ``executed`` (or ``refused``) audit entry are written and committed together.

So nothing is ever half done, and an action id that is already in ``actions`` is
reported as a duplicate and moves nothing (a retried confirmation, a reconnect, a
repeated "yes"). On start, an intent with no outcome (the process died between 1 and
2) is marked ``interrupted`` in the log: nothing moved, and the caller may confirm
again under the same action id.

``AGENT_BANK_FAULT=<point>`` (tests only) kills the process with SIGKILL at a named
point: ``after_intent``, ``before_commit`` (inside transaction 2, all writes done) or
``after_commit`` (before the caller is told).

Connections are per thread (sqlite3 objects must not be shared while in use); callers
on an event loop run these blocking methods in a thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sqlite3
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson

from agent.bank.backend import (
    MONEY_ACTIONS,
    Account,
    Action,
    AuditEntry,
    Card,
    CustomerView,
    Outcome,
    Payee,
    PendingRecord,
    Transaction,
)
from agent.bank.directory import SEED_PATH

FAULT_ENV = "AGENT_BANK_FAULT"
FAULT_POINTS = frozenset({"after_intent", "before_commit", "after_commit"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS customers (id TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS accounts (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    currency TEXT NOT NULL,
    balance_minor INTEGER NOT NULL,
    daily_limit_minor INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS payees (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('person', 'biller')),
    amount_due_minor INTEGER,
    due_currency TEXT
);
CREATE TABLE IF NOT EXISTS cards (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    last4 TEXT NOT NULL,
    kind TEXT NOT NULL,
    locked INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS transactions (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    posted_at TEXT NOT NULL,
    description TEXT NOT NULL,
    amount_minor INTEGER NOT NULL,
    currency TEXT NOT NULL,
    action_id TEXT
);
CREATE INDEX IF NOT EXISTS transactions_by_account ON transactions (account_id, posted_at);
-- One row per executed action: the idempotency record.
CREATE TABLE IF NOT EXISTS actions (
    action_id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    account_id TEXT,
    amount_minor INTEGER,
    currency TEXT,
    day TEXT NOT NULL,
    executed_at TEXT NOT NULL,
    balance_after_minor INTEGER,
    call_id TEXT,
    turn INTEGER
);
CREATE INDEX IF NOT EXISTS actions_by_day ON actions (account_id, day);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    call_id TEXT,
    turn INTEGER,
    action_id TEXT,
    event TEXT NOT NULL,
    kind TEXT,
    content TEXT,
    reason TEXT
);
CREATE INDEX IF NOT EXISTS audit_by_action ON audit (action_id);
-- The action read back to a caller, awaiting their yes; survives a dropped connection.
CREATE TABLE IF NOT EXISTS pending (
    customer_id TEXT PRIMARY KEY,
    action_id TEXT NOT NULL,
    action TEXT NOT NULL,
    readback TEXT NOT NULL,
    call_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('awaiting', 'executed')),
    expires_at TEXT NOT NULL
);
"""

# Plain words for the bank's own checks. The dialogue's policy runs the same checks
# first with better words; these trip only when something changed in between.
_GUARD_WORDS = {
    "unknown_account": "that account isn't one of yours",
    "currency_mismatch": "the account holds a different currency",
    "non_positive_amount": "the amount has to be more than zero",
    "unknown_payee": "that recipient isn't on your list of saved payees",
    "insufficient_funds": "there isn't enough money in the account",
    "daily_limit": "it would go over the account's daily limit",
    "unknown_card": "that card isn't one of yours",
    "card_already_locked": "the card is already locked",
    "card_not_locked": "the card isn't locked",
}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SQLiteBank:
    """The embedded :class:`~agent.bank.backend.BankBackend`."""

    def __init__(
        self,
        path: str | Path,
        *,
        seed_path: Path = SEED_PATH,
        now: Callable[[], datetime] | None = None,
        fault: str | None = None,
    ) -> None:
        self.path = Path(path)
        self._now = now or (lambda: datetime.now(UTC))
        self._fault = fault if fault is not None else os.environ.get(FAULT_ENV) or None
        if self._fault and self._fault not in FAULT_POINTS:
            raise ValueError(f"unknown fault point {self._fault!r}; one of {sorted(FAULT_POINTS)}")
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._conn()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
        with self._tx(conn):
            if conn.execute("SELECT 1 FROM meta WHERE key = 'seeded'").fetchone() is None:
                self._seed(conn, orjson.loads(seed_path.read_bytes()))
        # Recovery only when no other live process uses the file: every process holds a
        # shared lock on a side file for its lifetime; the exclusive lock is free only
        # when this is the only one (a killed process's locks go with it).
        self._owner = open(self.path.with_name(self.path.name + ".lock"), "a")
        try:
            fcntl.flock(self._owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fcntl.flock(self._owner, fcntl.LOCK_SH)
            self.interrupted: list[str] = []
        else:
            self.interrupted = self._recover(conn)
            fcntl.flock(self._owner, fcntl.LOCK_SH)

    # --- plumbing -----------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=10.0, check_same_thread=False
            )
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=10000")
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    @staticmethod
    @contextlib.contextmanager
    def _tx(conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[None]:
        conn.execute(f"BEGIN {mode}")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _fault_point(self, name: str) -> None:
        if self._fault == name:
            os.kill(os.getpid(), signal.SIGKILL)

    def close(self) -> None:
        with self._all_lock:
            for conn in self._all:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._all.clear()
        self._local = threading.local()
        self._owner.close()

    def _seed(self, conn: sqlite3.Connection, seed: dict) -> None:
        for c in seed["customers"]:
            conn.execute("INSERT INTO customers VALUES (?, ?)", (c["id"], c["name"]))
            currencies = {}
            for i, a in enumerate(c["accounts"]):
                currencies[a["id"]] = a["currency"]
                conn.execute(
                    "INSERT INTO accounts VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        a["id"],
                        c["id"],
                        i,
                        a["name"],
                        a["currency"],
                        a["balance_minor"],
                        a["daily_limit_minor"],
                    ),
                )
            for i, p in enumerate(c["payees"]):
                conn.execute(
                    "INSERT INTO payees VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        p["id"],
                        c["id"],
                        i,
                        p["name"],
                        p["kind"],
                        p.get("amount_due_minor"),
                        p.get("due_currency"),
                    ),
                )
            for card in c["cards"]:
                conn.execute(
                    "INSERT INTO cards VALUES (?, ?, ?, ?, ?)",
                    (card["id"], c["id"], card["last4"], card["kind"], int(card["locked"])),
                )
            for t in c.get("transactions", ()):
                conn.execute(
                    "INSERT INTO transactions VALUES (?, ?, ?, ?, ?, ?, NULL)",
                    (
                        t["id"],
                        t["account_id"],
                        t["posted_at"],
                        t["description"],
                        t["amount_minor"],
                        currencies[t["account_id"]],
                    ),
                )
        conn.execute("INSERT INTO meta VALUES ('seeded', ?)", (_iso(self._now()),))

    def _recover(self, conn: sqlite3.Connection) -> list[str]:
        """Mark intents left without an outcome by a crash: nothing of them happened."""
        with self._tx(conn):
            rows = conn.execute(
                """SELECT a.customer_id, a.call_id, a.turn, a.action_id, a.kind, a.content
                   FROM audit a
                   WHERE a.event = 'intent' AND NOT EXISTS (
                       SELECT 1 FROM audit b WHERE b.action_id = a.action_id AND b.seq > a.seq
                       AND b.event IN ('executed', 'duplicate', 'refused', 'interrupted'))"""
            ).fetchall()
            for customer_id, call_id, turn, action_id, kind, content in rows:
                self._audit(
                    conn,
                    customer_id,
                    call_id,
                    turn,
                    action_id,
                    "interrupted",
                    kind,
                    content,
                    "the server stopped before the action completed; nothing was changed",
                )
        return [row[3] for row in rows]

    def _audit(
        self,
        conn: sqlite3.Connection,
        customer_id: str,
        call_id: str | None,
        turn: int | None,
        action_id: str | None,
        event: str,
        kind: str | None,
        content: str | None,
        reason: str | None = None,
    ) -> None:
        conn.execute(
            "INSERT INTO audit (at, customer_id, call_id, turn, action_id, event, kind, content,"
            " reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                _iso(self._now()),
                customer_id,
                call_id,
                turn,
                action_id,
                event,
                kind,
                content,
                reason,
            ),
        )

    # --- reads --------------------------------------------------------------------------

    def accounts(self, customer_id: str) -> list[Account]:
        rows = self._conn().execute(
            "SELECT id, name, currency, balance_minor, daily_limit_minor FROM accounts"
            " WHERE customer_id = ? ORDER BY position",
            (customer_id,),
        )
        return [Account(*row) for row in rows]

    def _payees(self, customer_id: str, kind: str | None = None) -> list[Payee]:
        rows = self._conn().execute(
            "SELECT id, name, kind, amount_due_minor, due_currency FROM payees"
            " WHERE customer_id = ? AND (? IS NULL OR kind = ?) ORDER BY position",
            (customer_id, kind, kind),
        )
        return [Payee(*row) for row in rows]

    def payees(self, customer_id: str) -> list[Payee]:
        return self._payees(customer_id, "person")

    def billers(self, customer_id: str) -> list[Payee]:
        return self._payees(customer_id, "biller")

    def cards(self, customer_id: str) -> list[Card]:
        rows = self._conn().execute(
            "SELECT id, last4, kind, locked FROM cards WHERE customer_id = ? ORDER BY id",
            (customer_id,),
        )
        return [Card(i, last4, kind, bool(locked)) for i, last4, kind, locked in rows]

    def recent_transactions(
        self, customer_id: str, account_id: str | None = None, limit: int = 5
    ) -> list[Transaction]:
        rows = self._conn().execute(
            """SELECT t.id, t.account_id, t.posted_at, t.description, t.amount_minor, t.currency
               FROM transactions t JOIN accounts a ON a.id = t.account_id
               WHERE a.customer_id = ? AND (? IS NULL OR t.account_id = ?)
               ORDER BY t.posted_at DESC, t.rowid DESC LIMIT ?""",
            (customer_id, account_id, account_id, limit),
        )
        return [Transaction(*row) for row in rows]

    def _spent_today(self, conn: sqlite3.Connection, account_id: str) -> int:
        day = self._now().astimezone(UTC).date().isoformat()
        row = conn.execute(
            "SELECT COALESCE(SUM(amount_minor), 0) FROM actions WHERE account_id = ? AND day = ?",
            (account_id, day),
        ).fetchone()
        return int(row[0])

    def customer_view(self, customer_id: str) -> CustomerView | None:
        conn = self._conn()
        with self._tx(conn, "DEFERRED"):  # one consistent snapshot
            row = conn.execute("SELECT name FROM customers WHERE id = ?", (customer_id,))
            found = row.fetchone()
            if found is None:
                return None
            accounts = tuple(self.accounts(customer_id))
            return CustomerView(
                customer_id=customer_id,
                name=found[0],
                accounts=accounts,
                payees=tuple(self._payees(customer_id)),
                cards=tuple(self.cards(customer_id)),
                spent_today={a.id: self._spent_today(conn, a.id) for a in accounts},
                recent=tuple(self.recent_transactions(customer_id)),
            )

    def audit_log(self, customer_id: str | None = None) -> list[AuditEntry]:
        rows = self._conn().execute(
            "SELECT seq, at, customer_id, call_id, turn, action_id, event, kind, content, reason"
            " FROM audit WHERE ? IS NULL OR customer_id = ? ORDER BY seq",
            (customer_id, customer_id),
        )
        return [AuditEntry(*row) for row in rows]

    # --- actions ------------------------------------------------------------------------

    def execute(self, action_id: str, action: Action, *, call_id: str, turn: int | None) -> Outcome:
        conn = self._conn()
        content = action.to_json()
        with self._tx(conn):
            done = self._executed(conn, action_id)
            if done is None:
                self._audit(
                    conn,
                    action.customer_id,
                    call_id,
                    turn,
                    action_id,
                    "intent",
                    action.kind,
                    content,
                )
        if done is not None:
            return self._duplicate(conn, done, action, call_id, turn)
        self._fault_point("after_intent")
        with self._tx(conn):
            done = self._executed(conn, action_id)  # another call got there first
            if done is None:
                outcome = self._apply(conn, action_id, action, call_id, turn)
                self._fault_point("before_commit")
        if done is not None:
            return self._duplicate(conn, done, action, call_id, turn)
        self._fault_point("after_commit")
        return outcome

    def _executed(self, conn: sqlite3.Connection, action_id: str) -> Outcome | None:
        row = conn.execute(
            "SELECT balance_after_minor, executed_at FROM actions WHERE action_id = ?",
            (action_id,),
        ).fetchone()
        if row is None:
            return None
        return Outcome(
            action_id, "executed", duplicate=True, balance_after_minor=row[0], executed_at=row[1]
        )

    def _duplicate(
        self,
        conn: sqlite3.Connection,
        done: Outcome,
        action: Action,
        call_id: str,
        turn: int | None,
    ) -> Outcome:
        with self._tx(conn):
            self._audit(
                conn,
                action.customer_id,
                call_id,
                turn,
                done.action_id,
                "duplicate",
                action.kind,
                action.to_json(),
                "already executed; nothing changed",
            )
        return done

    def _apply(
        self,
        conn: sqlite3.Connection,
        action_id: str,
        action: Action,
        call_id: str,
        turn: int | None,
    ) -> Outcome:
        """Checks and effects, inside the caller's transaction."""
        code = self._guard(conn, action)
        content = action.to_json()
        if code is not None:
            self._audit_refusal(conn, action, action_id, code, call_id=call_id, turn=turn)
            return Outcome(action_id, "refused", reason_code=code, reason=_GUARD_WORDS[code])
        now = self._now()
        at = _iso(now)
        balance_after = None
        if action.kind in MONEY_ACTIONS:
            assert action.amount is not None and action.account_id is not None
            minor = action.amount.minor
            conn.execute(
                "UPDATE accounts SET balance_minor = balance_minor - ? WHERE id = ?",
                (minor, action.account_id),
            )
            balance_after = conn.execute(
                "SELECT balance_minor FROM accounts WHERE id = ?", (action.account_id,)
            ).fetchone()[0]
            payee = conn.execute(
                "SELECT name FROM payees WHERE id = ?", (action.payee_id,)
            ).fetchone()[0]
            what = "Transfer to" if action.kind == "transfer" else "Bill payment to"
            conn.execute(
                "INSERT INTO transactions VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    "t-" + action_id.removeprefix("act-")[:24],
                    action.account_id,
                    at,
                    f"{what} {payee}",
                    -minor,
                    action.amount.currency,
                    action_id,
                ),
            )
            if action.kind == "bill_payment":
                conn.execute(
                    "UPDATE payees SET amount_due_minor = MAX(amount_due_minor - ?, 0)"
                    " WHERE id = ? AND due_currency = ? AND amount_due_minor IS NOT NULL",
                    (minor, action.payee_id, action.amount.currency),
                )
        else:
            locked = int(action.kind == "lock_card")
            conn.execute("UPDATE cards SET locked = ? WHERE id = ?", (locked, action.card_id))
        conn.execute(
            "INSERT INTO actions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                action_id,
                action.customer_id,
                action.kind,
                content,
                action.account_id,
                action.amount.minor if action.amount else None,
                action.amount.currency if action.amount else None,
                now.astimezone(UTC).date().isoformat(),
                at,
                balance_after,
                call_id,
                turn,
            ),
        )
        conn.execute(
            "UPDATE pending SET status = 'executed' WHERE customer_id = ? AND action_id = ?",
            (action.customer_id, action_id),
        )
        self._audit(
            conn, action.customer_id, call_id, turn, action_id, "executed", action.kind, content
        )
        return Outcome(action_id, "executed", balance_after_minor=balance_after, executed_at=at)

    def _guard(self, conn: sqlite3.Connection, action: Action) -> str | None:
        """The hard invariants, read inside the write transaction (no race can pass them)."""
        customer = action.customer_id
        if action.kind in MONEY_ACTIONS:
            amount = action.amount
            account = conn.execute(
                "SELECT currency, balance_minor, daily_limit_minor FROM accounts"
                " WHERE id = ? AND customer_id = ?",
                (action.account_id, customer),
            ).fetchone()
            if account is None:
                return "unknown_account"
            currency, balance, limit = account
            if amount is None or amount.minor <= 0:
                return "non_positive_amount"
            if amount.currency != currency:
                return "currency_mismatch"
            kind = "person" if action.kind == "transfer" else "biller"
            payee = conn.execute(
                "SELECT 1 FROM payees WHERE id = ? AND customer_id = ? AND kind = ?",
                (action.payee_id, customer, kind),
            ).fetchone()
            if payee is None:
                return "unknown_payee"
            if amount.minor > balance:
                return "insufficient_funds"
            assert action.account_id is not None
            if self._spent_today(conn, action.account_id) + amount.minor > limit:
                return "daily_limit"
            return None
        card = conn.execute(
            "SELECT locked FROM cards WHERE id = ? AND customer_id = ?",
            (action.card_id, customer),
        ).fetchone()
        if card is None:
            return "unknown_card"
        if action.kind == "lock_card" and card[0]:
            return "card_already_locked"
        if action.kind == "unlock_card" and not card[0]:
            return "card_not_locked"
        return None

    def record_refusal(
        self,
        action_id: str,
        action: Action,
        reason_code: str,
        reason: str,
        *,
        call_id: str,
        turn: int | None,
    ) -> Outcome:
        conn = self._conn()
        with self._tx(conn):
            self._audit_refusal(conn, action, action_id, reason_code, call_id=call_id, turn=turn)
        return Outcome(action_id, "refused", reason_code=reason_code, reason=reason)

    def _audit_refusal(
        self,
        conn: sqlite3.Connection,
        action: Action,
        action_id: str,
        code: str,
        *,
        call_id: str,
        turn: int | None,
    ) -> None:
        self._audit(
            conn,
            action.customer_id,
            call_id,
            turn,
            action_id,
            "refused",
            action.kind,
            action.to_json(),
            code,
        )

    # --- pending confirmations ----------------------------------------------------------

    def save_pending(self, record: PendingRecord) -> None:
        conn = self._conn()
        with self._tx(conn):
            conn.execute(
                "INSERT OR REPLACE INTO pending VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    record.customer_id,
                    record.action_id,
                    record.action.to_json(),
                    record.readback,
                    record.call_id,
                    record.status,
                    record.expires_at,
                ),
            )

    def load_pending(self, customer_id: str) -> PendingRecord | None:
        row = (
            self._conn()
            .execute(
                "SELECT action_id, action, readback, call_id, status, expires_at FROM pending"
                " WHERE customer_id = ? AND expires_at > ?",
                (customer_id, _iso(self._now())),
            )
            .fetchone()
        )
        if row is None:
            return None
        action_id, action, readback, call_id, status, expires_at = row
        return PendingRecord(
            customer_id, action_id, Action.from_json(action), readback, call_id, status, expires_at
        )

    def clear_pending(
        self, customer_id: str, *, call_id: str, turn: int | None, reason: str = "cancelled"
    ) -> None:
        conn = self._conn()
        with self._tx(conn):
            row = conn.execute(
                "SELECT action_id, action, status FROM pending WHERE customer_id = ?",
                (customer_id,),
            ).fetchone()
            conn.execute("DELETE FROM pending WHERE customer_id = ?", (customer_id,))
            if row is not None and row[2] == "awaiting":
                kind = orjson.loads(row[1])["kind"]
                self._audit(
                    conn,
                    customer_id,
                    call_id,
                    turn,
                    row[0],
                    "cancelled",
                    kind,
                    row[1],
                    reason,
                )
