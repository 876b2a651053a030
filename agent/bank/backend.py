"""The bank as the agent sees it: a small typed interface and its value types.

Money is always an integer count of minor units plus an ISO 4217 code, with the
currency's own exponent (5,000 yen is ``Money(5000, "JPY")``; 42.50 dollars is
``Money(4250, "USD")``). Never floats.

The interface is synchronous: an implementation may block (SQLite does). Async code
calls it through a thread (``asyncio.to_thread``), as ``agent.dialogue.conversation``
does.

Money movement and card changes go through :meth:`BankBackend.execute` with an
*action id* chosen by the caller (derived from the call, the turn and the action's
content): executing the same id twice returns the first outcome and moves nothing.
Every execution and every refusal is in the audit log before the method returns.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

import orjson

# ISO 4217 minor-unit exponents of the currencies the bank holds; the rest are 2.
EXPONENT = {"JPY": 0, "KRW": 0}

ActionKind = Literal["transfer", "bill_payment", "lock_card", "unlock_card"]
MONEY_ACTIONS = frozenset({"transfer", "bill_payment"})


def exponent(currency: str) -> int:
    return EXPONENT.get(currency, 2)


@dataclass(frozen=True, slots=True)
class Money:
    minor: int
    currency: str


@dataclass(frozen=True, slots=True)
class Account:
    id: str
    name: str  # as the caller says it: "everyday account"
    currency: str
    balance_minor: int
    daily_limit_minor: int  # most that may leave the account per UTC day


@dataclass(frozen=True, slots=True)
class Transaction:
    id: str
    account_id: str
    posted_at: str  # ISO 8601, UTC
    description: str
    amount_minor: int  # signed: money out is negative
    currency: str


@dataclass(frozen=True, slots=True)
class Payee:
    id: str
    name: str
    kind: str  # "person" or "biller"
    # billers only: the bill outstanding, if the bank knows it
    amount_due_minor: int | None = None
    due_currency: str | None = None


@dataclass(frozen=True, slots=True)
class Card:
    id: str
    last4: str
    kind: str  # "debit" or "credit"
    locked: bool


@dataclass(frozen=True, slots=True)
class Action:
    """One thing that changes the bank: a transfer, a bill payment, a card lock/unlock."""

    kind: ActionKind
    customer_id: str
    account_id: str | None = None
    payee_id: str | None = None
    amount: Money | None = None
    card_id: str | None = None

    def content(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return orjson.dumps(self.content(), option=orjson.OPT_SORT_KEYS).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> Action:
        data = orjson.loads(text)
        amount = data.pop("amount")
        return cls(**data, amount=Money(**amount) if amount else None)


def action_id(call_key: str, turn: int, action: Action) -> str:
    """The idempotency key: the call, the turn that proposed the action, and its content."""
    digest = hashlib.sha256(f"{call_key}|{turn}|{action.to_json()}".encode()).hexdigest()
    return "act-" + digest[:32]


@dataclass(frozen=True, slots=True)
class Outcome:
    action_id: str
    status: Literal["executed", "refused"]
    reason_code: str | None = None  # refused: a stable code (policy.REASONS)
    reason: str | None = None  # refused: plain words for the caller
    duplicate: bool = False  # executed before, under the same action id: nothing new moved
    balance_after_minor: int | None = None  # money actions: the account balance afterwards
    executed_at: str | None = None


@dataclass(frozen=True, slots=True)
class PendingRecord:
    """An action read back to the caller and awaiting their yes, kept across reconnects."""

    customer_id: str
    action_id: str
    action: Action
    readback: str
    call_id: str
    status: Literal["awaiting", "executed"]
    expires_at: str


@dataclass(frozen=True, slots=True)
class AuditEntry:
    seq: int
    at: str
    customer_id: str
    call_id: str | None
    turn: int | None
    action_id: str | None
    event: str  # intent | executed | duplicate | refused | interrupted | cancelled
    kind: str | None
    content: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class CustomerView:
    """Everything the dialogue needs to know about the caller, read in one go."""

    customer_id: str
    name: str
    accounts: tuple[Account, ...]
    payees: tuple[Payee, ...]  # people and billers
    cards: tuple[Card, ...]
    spent_today: dict[str, int]  # account id -> minor units already sent today (UTC)
    recent: tuple[Transaction, ...] = ()

    def account(self, account_id: str | None) -> Account | None:
        return next((a for a in self.accounts if a.id == account_id), None)

    def payee(self, payee_id: str | None) -> Payee | None:
        return next((p for p in self.payees if p.id == payee_id), None)

    def card(self, card_id: str | None) -> Card | None:
        return next((c for c in self.cards if c.id == card_id), None)

    @property
    def currency(self) -> str:
        """The everyday (first) account's currency."""
        return self.accounts[0].currency if self.accounts else "GBP"


class BankBackend(Protocol):
    """What the agent may ask of a bank. Every method is scoped to one customer."""

    def customer_view(self, customer_id: str) -> CustomerView | None: ...

    def accounts(self, customer_id: str) -> list[Account]: ...

    def recent_transactions(
        self, customer_id: str, account_id: str | None = None, limit: int = 5
    ) -> list[Transaction]: ...

    def payees(self, customer_id: str) -> list[Payee]: ...

    def billers(self, customer_id: str) -> list[Payee]: ...

    def cards(self, customer_id: str) -> list[Card]: ...

    def execute(self, action_id: str, action: Action, *, call_id: str, turn: int | None) -> Outcome:
        """Transfer, pay a bill, lock or unlock a card: exactly once per action id.

        Re-checks ownership, balance and the daily limit inside the transaction; a
        refusal is audited and returned, never raised."""
        ...

    def record_refusal(
        self,
        action_id: str,
        action: Action,
        reason_code: str,
        reason: str,
        *,
        call_id: str,
        turn: int | None,
    ) -> Outcome: ...

    def save_pending(self, record: PendingRecord) -> None: ...

    def load_pending(self, customer_id: str) -> PendingRecord | None:
        """The caller's unexpired pending action, if any."""
        ...

    def clear_pending(
        self, customer_id: str, *, call_id: str, turn: int | None, reason: str = "cancelled"
    ) -> None:
        """Forget the pending action; one never confirmed is audited as cancelled."""
        ...

    def audit_log(self, customer_id: str | None = None) -> list[AuditEntry]: ...

    def close(self) -> None: ...
