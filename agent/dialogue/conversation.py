"""One call's conversation: the asyncio face of the dialogue state machine.

    conversation = Conversation(bank, customer_id="cust-001", call_id=call.id)
    async for phrase in conversation.respond(understanding, turn=3):
        ...  # each phrase becomes a response.text.delta

``respond`` feeds the understanding to :class:`~agent.dialogue.state.Dialogue` and
performs the effects it returns, in order: phrases are yielded, pending actions saved
and cleared, refusals audited, and a confirmed action checked by the policy (with fresh
balances and the confirmation rule) and then executed by the bank. The bank is
blocking (SQLite), so every call to it runs in a thread.

Turns are handled one at a time (a lock), in the order they reach ``respond``.
Execution is shielded from cancellation: a caller who hangs up or barges in right after
"yes" cannot leave an action half-reported; the next turn waits for it.

A reconnect finds the caller's pending action (saved at the read-back, kept for
``pending_ttl_s``): a "yes" as the first turn of the new call confirms it under its
original action id, so a "yes" said twice across a dropped connection executes once.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.bank.backend import BankBackend, CustomerView, Outcome
from agent.dialogue import policy
from agent.dialogue.state import (
    Answer,
    ClearPending,
    Dialogue,
    Effect,
    Execute,
    Handoff,
    Pending,
    RecordRefusal,
    SavePending,
    Say,
)
from agent.log import get_logger
from agent.understanding import Understanding

# (question, topic=..., on_mark=...) -> text deltas of the spoken answer
Answerer = Callable[..., AsyncIterator[str]]

log = get_logger("agent.dialogue")

PENDING_TTL_S = 120.0


class Conversation:
    def __init__(
        self,
        bank: BankBackend,
        *,
        customer_id: str,
        call_id: str,
        pending_ttl_s: float = PENDING_TTL_S,
        max_failures: int = 3,
        now: Callable[[], datetime] | None = None,
        answerer: Answerer | None = None,
    ) -> None:
        self.bank = bank
        self.customer_id = customer_id
        self.call_id = call_id
        # Call ids restart with the process; the nonce keeps action ids unique forever.
        self.call_key = f"{call_id}/{secrets.token_hex(8)}"
        self.pending_ttl_s = pending_ttl_s
        self.max_failures = max_failures
        self._now = now or (lambda: datetime.now(UTC))
        # Answers questions (agent.llm.Router.answer: retrieval, then the LLM).
        self.answerer = answerer
        self.dialogue: Dialogue | None = None
        self.handed_off = False
        self._lock = asyncio.Lock()
        self._executing: asyncio.Task[list[Effect]] | None = None
        self.log = log.bind(call_id=call_id, customer_id=customer_id)

    async def _bank(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(method, *args, **kwargs)

    async def respond(
        self,
        understanding: Understanding,
        *,
        turn: int,
        text: str = "",
        on_mark: Callable[[str], None] | None = None,
    ) -> AsyncIterator[str]:
        """The reply to one turn, phrase by phrase; runs the confirmed action inside.
        ``text`` is what the caller said (questions are answered from it); ``on_mark``
        receives the LLM's stage timings."""
        async with self._lock:
            if self._executing is not None:
                await asyncio.shield(self._executing)  # the last turn's action finishes first
                self._executing = None
            view: CustomerView | None = await self._bank(self.bank.customer_view, self.customer_id)
            if view is None:
                yield "Sorry, I can't find your accounts."
                return
            if self.dialogue is None:
                record = await self._bank(self.bank.load_pending, self.customer_id)
                resumed = Pending.from_record(record) if record else None
                self.dialogue = Dialogue(
                    view, call_key=self.call_key, max_failures=self.max_failures, resumed=resumed
                )
            effects = self.dialogue.handle(understanding, turn=turn, view=view)
            first = True
            queue = list(effects)
            while queue:
                effect = queue.pop(0)
                if isinstance(effect, Execute):
                    self._executing = asyncio.create_task(self._execute(effect.pending, turn))
                    queue[:0] = await asyncio.shield(self._executing)
                    self._executing = None
                    continue
                if isinstance(effect, Say):
                    yield effect.text if first else " " + effect.text
                    first = False
                elif isinstance(effect, Answer):
                    async for delta in self._answer(text, effect.topic, on_mark):
                        yield delta
                    first = False
                else:
                    await self._perform(effect, turn)

    async def _answer(
        self, question: str, topic: str | None, on_mark: Callable[[str], None] | None
    ) -> AsyncIterator[str]:
        if self.answerer is None:
            yield "I can't answer questions here; I can help with payments, balances and cards."
            return
        # aclosing: a reply cancelled mid-answer (barge-in) closes the LLM stream at once,
        # which stops generation on the server.
        async with contextlib.aclosing(
            self.answerer(question, topic=topic, on_mark=on_mark)
        ) as deltas:
            async for delta in deltas:
                yield delta

    async def _perform(self, effect: Effect, turn: int) -> None:
        if isinstance(effect, SavePending):
            expires = self._now() + timedelta(seconds=self.pending_ttl_s)
            at = expires.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            await self._bank(self.bank.save_pending, effect.pending.record(self.call_id, at))
            self.log.info("action_read_back", action_id=effect.pending.action_id, turn=turn)
        elif isinstance(effect, ClearPending):
            await self._bank(
                self.bank.clear_pending,
                self.customer_id,
                call_id=self.call_id,
                turn=turn,
                reason=effect.reason,
            )
        elif isinstance(effect, RecordRefusal):
            await self._bank(
                self.bank.record_refusal,
                effect.action_id,
                effect.action,
                effect.refusal.code,
                effect.refusal.reason,
                call_id=self.call_id,
                turn=turn,
            )
            self.log.info("action_refused", action_id=effect.action_id, code=effect.refusal.code)
        elif isinstance(effect, Handoff):
            self.handed_off = True
            self.log.info("human_handoff", reason=effect.reason, turn=turn)

    async def _execute(self, pending: Pending, turn: int) -> list[Effect]:
        """Policy with fresh balances, then the bank; always ends with the dialogue told.

        Returns the phrases to say; the other effects are performed here, so that they
        happen even when nobody is left to hear the phrases."""
        dialogue = self.dialogue
        assert dialogue is not None
        try:
            view = await self._bank(self.bank.customer_view, self.customer_id)
            confirmed = pending.action_id if pending.action_id in dialogue.confirmed else None
            refusal = policy.check(
                pending.action, view, action_id=pending.action_id, confirmed_action_id=confirmed
            )
            outcome: Outcome
            if refusal is not None:
                outcome = await self._bank(
                    self.bank.record_refusal,
                    pending.action_id,
                    pending.action,
                    refusal.code,
                    refusal.reason,
                    call_id=self.call_id,
                    turn=turn,
                )
            else:
                outcome = await self._bank(
                    self.bank.execute,
                    pending.action_id,
                    pending.action,
                    call_id=self.call_id,
                    turn=turn,
                )
            dialogue.view = view
        except Exception:
            self.log.exception("action_failed", action_id=pending.action_id)
            return dialogue.execution_failed()
        return await self._after(dialogue.executed(outcome), outcome, pending, turn)

    async def _after(
        self, effects: list[Effect], outcome: Outcome, pending: Pending, turn: int
    ) -> list[Effect]:
        self.log.info(
            "action_" + outcome.status,
            action_id=pending.action_id,
            kind=pending.action.kind,
            duplicate=outcome.duplicate,
            code=outcome.reason_code,
            turn=turn,
        )
        for effect in effects:
            if not isinstance(effect, Say):
                await self._perform(effect, turn)
        return [e for e in effects if isinstance(e, Say)]
