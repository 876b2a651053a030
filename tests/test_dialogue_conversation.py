"""The per-call Conversation on a real SQLite bank, without a server: turns in order,
execution that survives a cancelled reply, a reconnect, and a failing bank."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime
from pathlib import Path

import pytest

from agent.bank.backend import Action, Outcome
from agent.bank.sqlite import SQLiteBank
from agent.dialogue.conversation import Conversation
from agent.understanding import Payee, Understander, Understanding

NLU = Understander.load()


@pytest.fixture
def bank(tmp_path: Path):
    bank = SQLiteBank(tmp_path / "bank.sqlite3")
    yield bank
    bank.close()


def understand(bank: SQLiteBank, text: str, customer: str = "cust-001") -> Understanding:
    view = bank.customer_view(customer)
    assert view is not None
    payees = NLU.payee_index([Payee(p.id, p.name, p.kind) for p in view.payees])
    return NLU.understand(text, payees=payees, now=datetime.now(), default_currency=view.currency)


async def reply(conversation: Conversation, bank: SQLiteBank, text: str, turn: int) -> str:
    u = understand(bank, text, conversation.customer_id)
    return "".join([p async for p in conversation.respond(u, turn=turn)])


async def test_phrases_stream_and_join_into_the_reply(bank: SQLiteBank) -> None:
    conversation = Conversation(bank, customer_id="cust-001", call_id="call-1")
    phrases = [p async for p in conversation.respond(understand(bank, "what's my balance"), turn=1)]
    assert phrases == [
        "Your everyday account has 5,234.50 pounds.",
        " Your savings account has 12,000 pounds.",
        " Your yen account has 250,000 yen.",
    ]


class SlowBank(SQLiteBank):
    """Holds execute() until released, to cancel the reply while the bank works."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.entered = threading.Event()
        self.release = threading.Event()

    def execute(self, action_id: str, action: Action, **kwargs: object) -> Outcome:
        self.entered.set()
        assert self.release.wait(10)
        return super().execute(action_id, action, **kwargs)  # type: ignore[arg-type]


async def test_a_cancelled_reply_does_not_cancel_the_action(tmp_path: Path) -> None:
    bank = SlowBank(tmp_path / "bank.sqlite3")
    conversation = Conversation(bank, customer_id="cust-001", call_id="call-1")
    await reply(conversation, bank, "send five thousand yen to Ken Sato", 1)
    task = asyncio.create_task(reply(conversation, bank, "yes", 2))
    await asyncio.to_thread(bank.entered.wait, 10)
    task.cancel()  # barge-in or hang-up while the bank is executing
    with pytest.raises(asyncio.CancelledError):
        await task
    bank.release.set()
    # The next turn waits for the action to finish, and finds nothing left to confirm.
    assert await reply(conversation, bank, "yes", 3) == (
        "There's nothing waiting for your confirmation."
    )
    assert bank.accounts("cust-001")[2].balance_minor == 245000
    assert [e.event for e in bank.audit_log()] == ["intent", "executed"]
    bank.close()


async def test_a_new_connection_resumes_the_read_back_once(bank: SQLiteBank) -> None:
    first = Conversation(bank, customer_id="cust-001", call_id="call-1")
    assert await reply(first, bank, "send five thousand yen to Ken Sato", 1) == (
        "Send 5,000 yen to Ken Sato from your yen account?"
    )
    # the line drops before the yes; the caller rings back
    second = Conversation(bank, customer_id="cust-001", call_id="call-2")
    said = await reply(second, bank, "yes", 1)
    assert said.startswith("Picking up where we were cut off. Done. I've sent 5,000 yen")
    third = Conversation(bank, customer_id="cust-001", call_id="call-3")
    said = await reply(third, bank, "yes", 1)
    assert "already done" in said
    assert bank.accounts("cust-001")[2].balance_minor == 245000
    # another customer never sees it
    other = Conversation(bank, customer_id="cust-002", call_id="call-4")
    assert await reply(other, bank, "yes", 1) == "There's nothing waiting for your confirmation."


async def test_a_pending_read_back_expires(bank: SQLiteBank) -> None:
    first = Conversation(bank, customer_id="cust-001", call_id="call-1", pending_ttl_s=-1)
    await reply(first, bank, "send five thousand yen to Ken Sato", 1)
    second = Conversation(bank, customer_id="cust-001", call_id="call-2")
    assert await reply(second, bank, "yes", 1) == "There's nothing waiting for your confirmation."


class BrokenBank(SQLiteBank):
    def execute(self, action_id: str, action: Action, **kwargs: object) -> Outcome:
        raise OSError("disk on fire")


async def test_a_failing_bank_is_reported_not_raised(tmp_path: Path) -> None:
    bank = BrokenBank(tmp_path / "bank.sqlite3")
    conversation = Conversation(bank, customer_id="cust-001", call_id="call-1")
    await reply(conversation, bank, "lock my card", 1)
    assert (await reply(conversation, bank, "yes", 2)).startswith(
        "Sorry, I couldn't complete that just now."
    )
    assert await reply(conversation, bank, "what's my balance", 3)
    bank.close()


async def test_turns_are_handled_in_the_order_they_arrive(bank: SQLiteBank) -> None:
    conversation = Conversation(bank, customer_id="cust-001", call_id="call-1")
    request = understand(bank, "send five thousand yen to Ken Sato")
    yes = understand(bank, "yes")

    async def collect(u: Understanding, turn: int) -> str:
        return "".join([p async for p in conversation.respond(u, turn=turn)])

    read_back, done = await asyncio.gather(collect(request, 1), collect(yes, 2))
    assert read_back.startswith("Send 5,000 yen")
    assert done.startswith("Done. I've sent 5,000 yen to Ken Sato.")
