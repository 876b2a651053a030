"""The dialogue state machine: one call's conversation, with no I/O inside.

    dialogue = Dialogue(view, call_key="call-7/3f2a")
    effects = dialogue.handle(understanding, turn=1, view=view)   # -> [Say(...), ...]
    ... the caller of handle() performs the effects (say, save, audit, execute) ...
    effects = dialogue.executed(outcome)                          # after an Execute

Modes::

    idle --money/card request--> collecting --all slots--> confirming --yes--> (Execute)
                 |                   |  ^                      |  |
                 |              disambiguating             no: cancel; "no, make it six
                 |             ("Ken Sato or Ken Saito?")   thousand": correct, read back
                 +--"a person please" / repeated failures--> handed_off

* Slot filling asks only for what is missing (recipient, then amount; a bill's amount
  defaults to the amount due; the account is the caller's first one in the currency).
* Before the read-back, :mod:`agent.dialogue.policy` checks the action (without the
  confirmation rule), so the caller is never asked to confirm what would be refused.
* The read-back is explicit and names everything that will happen; only a clear "yes"
  to it produces :class:`Execute`. Anything that changes the action makes a new pending
  action with a new action id, read back again.
* The understanding of a bare reply ("yes", "Ken Sato", "six thousand") has intent
  confirm/deny/out_of_scope: its meaning comes from the mode it arrives in.
* Recipients come only from the caller's own payee list (the understanding's candidate
  ids); an account number or a name that is not a payee never becomes a recipient.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from agent.bank.backend import (
    MONEY_ACTIONS,
    Action,
    ActionKind,
    CustomerView,
    Money,
    Outcome,
    PendingRecord,
    action_id,
    exponent,
)
from agent.dialogue import policy
from agent.dialogue.replies import spoken_money
from agent.understanding import Understanding
from agent.understanding.phonetic import fold_name

MIN_RECIPIENT_SCORE = 0.75  # the understanding's own bar for a recipient candidate
RECIPIENT_MARGIN = 0.06  # candidates this close to the best are asked about
YES_CONFIDENCE = 0.9  # a "yes" must be at least this sure to move money
NO_CONFIDENCE = 0.8  # a "no" this sure cancels; a vaguer one is asked about again
MAX_FAILURES = 3  # consecutive turns that get nowhere before a human takes over
MAX_OPTIONS = 3  # names offered in one disambiguation question

Mode = Literal["idle", "collecting", "disambiguating", "confirming", "executing", "handed_off"]

_AMOUNT_REFUSALS = frozenset(
    {
        "non_positive_amount",
        "unsupported_currency",
        "no_account_in_currency",
        "currency_mismatch",
        "insufficient_funds",
        "daily_limit",
    }
)
_INFO_INTENTS = frozenset({"check_balance", "recent_transactions"})
_MONEY_INTENTS = {"transfer_money": "transfer", "pay_bill": "bill_payment"}
_CARD_INTENTS = {"lock_card": "lock_card", "unlock_card": "unlock_card"}


# --- effects: what the caller of the state machine must do, in order -----------------


@dataclass(frozen=True, slots=True)
class Say:
    text: str


@dataclass(frozen=True, slots=True)
class Pending:
    """An action read back to the caller, awaiting a yes."""

    action: Action
    action_id: str
    readback: str
    resumed: bool = False  # restored from a previous connection of the same caller
    executed: bool = False  # resumed, and the bank had already executed it

    def record(self, call_id: str, expires_at: str) -> PendingRecord:
        return PendingRecord(
            self.action.customer_id,
            self.action_id,
            self.action,
            self.readback,
            call_id,
            "awaiting",
            expires_at,
        )

    @classmethod
    def from_record(cls, record: PendingRecord) -> Pending:
        executed = record.status == "executed"
        return cls(record.action, record.action_id, record.readback, True, executed)


@dataclass(frozen=True, slots=True)
class SavePending:
    pending: Pending


@dataclass(frozen=True, slots=True)
class ClearPending:
    reason: str = "cancelled by the caller"


@dataclass(frozen=True, slots=True)
class RecordRefusal:
    action_id: str
    action: Action
    refusal: policy.Refusal


@dataclass(frozen=True, slots=True)
class Execute:
    """Run the confirmed action (policy, then the bank); then call Dialogue.executed."""

    pending: Pending


@dataclass(frozen=True, slots=True)
class Handoff:
    reason: str  # "requested" or "repeated_failures"


@dataclass(frozen=True, slots=True)
class Answer:
    """Answer the caller's question (retrieval over the FAQ, then the LLM), streamed."""

    topic: str | None


Effect = Say | SavePending | ClearPending | RecordRefusal | Execute | Handoff | Answer


@dataclass(slots=True)
class Draft:
    """The action being put together, slot by slot."""

    kind: ActionKind
    payee_id: str | None = None
    options: tuple[str, ...] = ()  # payee ids the caller is asked to choose among
    amount: Money | None = None

    @classmethod
    def of(cls, action: Action) -> Draft:
        return cls(action.kind, action.payee_id, (), action.amount)


# --- reading an understanding ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Slots:
    amount: Money | None
    implicit_currency: bool  # the caller named no currency: the account default was used
    candidates: tuple[tuple[str, float], ...]  # (payee id, score), best first
    spoken_name: str | None
    account_ref: str | None

    @property
    def any(self) -> bool:
        return self.amount is not None or bool(self.candidates) or bool(self.spoken_name)


def _slots(u: Understanding) -> _Slots:
    e = u.entities
    amount = None
    if isinstance(e.get("amount"), dict) and e["amount"].get("currency"):
        amount = Money(int(e["amount"]["minor"]), str(e["amount"]["currency"]))
    implicit = any(getattr(t, "rule", "") == "currency:account_default" for t in u.trace)
    candidates = tuple(
        (str(c["id"]), float(c.get("score", 0.0))) for c in e.get("recipient_candidates") or ()
    )
    name = e.get("person") or e.get("company")
    return _Slots(amount, implicit, candidates, name, e.get("account_ref"))


def _in_currency(amount: Money, currency: str) -> Money | None:
    """Re-read an amount said without a currency ("make it six thousand") in another one."""
    if amount.currency == currency:
        return amount
    value = amount.minor / 10 ** exponent(amount.currency)
    minor = value * 10 ** exponent(currency)
    return Money(int(minor), currency) if minor == int(minor) else None


def _names(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]


class Dialogue:
    def __init__(
        self,
        view: CustomerView,
        *,
        call_key: str,
        max_failures: int = MAX_FAILURES,
        resumed: Pending | None = None,
    ) -> None:
        self.view = view
        self.call_key = call_key  # unique per call: part of every action id
        self.max_failures = max_failures
        self.mode: Mode = "idle"
        self.draft: Draft | None = None
        self.pending: Pending | None = None
        self.question = ""  # the last question asked, to ask again
        self.failures = 0
        self.confirmed: set[str] = set()  # action ids the caller said yes to in this session
        self.turns = 0
        if resumed is not None:
            self.pending = resumed
            self.draft = Draft.of(resumed.action)
            self.mode = "confirming"

    # --- the entry points -------------------------------------------------------------

    def handle(
        self, u: Understanding, *, turn: int, view: CustomerView | None = None
    ) -> list[Effect]:
        if view is not None:
            self.view = view
        self.turns += 1
        if self.mode == "handed_off":
            return [Say("A colleague will be with you shortly.")]
        if u.intent == "human_handoff":
            return self._handoff("requested")
        if self.pending is not None and self.pending.resumed and self.turns == 1:
            if u.intent not in ("confirm", "deny") or _slots(u).any:
                # Only a bare yes or no answers the question of the dropped call; a new
                # call that starts with anything else drops it and is heard afresh.
                self.pending = self.draft = None
                self.mode = "idle"
                return [ClearPending("a new call asked for something else"), *self._idle(u, turn)]
        if self.mode == "confirming":
            return self._confirming(u, turn)
        if self.mode in ("collecting", "disambiguating"):
            return self._collecting(u, turn)
        return self._idle(u, turn)

    def executed(self, outcome: Outcome) -> list[Effect]:
        """The result of an Execute: tell the caller, forget the action."""
        pending = self.pending
        assert pending is not None, "executed() without a pending action"
        self.pending = self.draft = None
        self.mode = "idle"
        self.failures = 0
        effects: list[Effect] = []
        if pending.resumed:
            effects.append(Say("Picking up where we were cut off."))
        if outcome.status == "refused":
            reason = outcome.reason or "It wasn't allowed."
            return [*effects, ClearPending("refused"), Say("I haven't done that."), Say(reason)]
        action = pending.action
        if outcome.duplicate:
            effects.append(Say(f"That was already done: {self._done_words(action, past=True)}."))
            if pending.resumed:
                effects.append(ClearPending("already executed"))
            return effects
        effects.append(Say(f"Done. {self._done_words(action)}."))
        account = self.view.account(action.account_id)
        if account is not None and outcome.balance_after_minor is not None:
            balance = spoken_money(outcome.balance_after_minor, account.currency)
            effects.append(Say(f"Your {account.name} now has {balance}."))
        return effects

    # --- modes --------------------------------------------------------------------------

    def _idle(self, u: Understanding, turn: int) -> list[Effect]:
        intent = u.intent
        if intent in _MONEY_INTENTS:
            self.draft = Draft(_MONEY_INTENTS[intent])  # type: ignore[arg-type]
            return self._fill(u, turn)
        if intent in _CARD_INTENTS and u.confidence >= 0.5:
            self.draft = Draft(_CARD_INTENTS[intent])  # type: ignore[arg-type]
            return self._advance(turn)
        if intent in _INFO_INTENTS:
            self.failures = 0
            return self._info(intent)
        if intent == "confirm" and u.confidence >= YES_CONFIDENCE:
            return [Say("There's nothing waiting for your confirmation.")]
        if intent == "deny":
            return [Say("Okay.")]
        if intent == "faq":
            self.failures = 0
            return [Answer(u.topic)]
        return self._failed([Say("Sorry, I can help with your accounts, payments and cards.")])

    def _collecting(self, u: Understanding, turn: int) -> list[Effect]:
        slots = _slots(u)
        if u.intent == "deny" and u.confidence >= NO_CONFIDENCE and not slots.any:
            return self._cancel()
        if u.intent in _INFO_INTENTS and u.confidence >= 0.5 and not slots.any:
            return [*self._info(u.intent), Say(self.question)]
        if u.intent in _CARD_INTENTS and u.confidence >= 0.5:
            return self._switch(u, turn)
        if slots.any or slots.account_ref:
            return self._fill(u, turn)
        return self._failed([Say("Sorry, I didn't catch that."), Say(self.question)])

    def _confirming(self, u: Understanding, turn: int) -> list[Effect]:
        assert self.pending is not None
        slots = _slots(u)
        if u.intent == "confirm" and u.confidence >= YES_CONFIDENCE and not slots.any:
            self.confirmed.add(self.pending.action_id)
            self.mode = "executing"
            return [Execute(self.pending)]
        if u.intent == "deny" and u.confidence >= NO_CONFIDENCE and not slots.any:
            if self.pending.executed:  # too late to cancel: it went through before the drop
                done = self._done_words(self.pending.action, past=True)
                self._reset()
                return [
                    ClearPending("already executed"),
                    Say(f"That was already done before we were cut off: {done}."),
                ]
            return self._cancel()
        if u.intent in _INFO_INTENTS and u.confidence >= 0.5 and not slots.any:
            return [*self._info(u.intent), Say(self.pending.readback)]
        if u.intent in _CARD_INTENTS and u.confidence >= 0.5:
            return self._switch(u, turn)
        if slots.any and self.pending.action.kind in MONEY_ACTIONS:
            # A correction: "no, make it six thousand", "send it to Ken Saito instead".
            old, self.pending = self.pending, None
            effects = self._fill(u, turn, correcting=True)
            if self.pending is not None and self.pending.action == old.action:
                self.pending = old  # nothing changed: the same question, the same action id
                return [e for e in effects if not isinstance(e, SavePending | Say)] + [
                    *[e for e in effects if isinstance(e, Say) and e.text != old.readback],
                    Say(old.readback),
                ]
            return [ClearPending("replaced by a correction"), *effects]
        if u.intent in _MONEY_INTENTS and (u.confidence >= 0.5 or slots.any):
            return self._switch(u, turn)
        return self._failed(
            [Say("Please say yes to go ahead, or no to cancel."), Say(self.pending.readback)]
        )

    # --- building the action ------------------------------------------------------------

    def _fill(self, u: Understanding, turn: int, *, correcting: bool = False) -> list[Effect]:
        assert self.draft is not None
        draft = self.draft
        slots = _slots(u)
        said: list[Effect] = []
        if slots.amount is not None:
            amount = slots.amount
            if draft.amount is not None and slots.implicit_currency and correcting:
                amount = _in_currency(amount, draft.amount.currency) or amount
            draft.amount = amount
        progressed = slots.amount is not None
        if slots.candidates or slots.spoken_name:
            chosen, options, problem = self._resolve(slots, draft.options)
            if chosen is not None:
                payee = self.view.payee(chosen)
                draft.payee_id, draft.options = chosen, ()
                if draft.kind in MONEY_ACTIONS and payee is not None:
                    # "pay Priya Patel" is a transfer; "send money to Aqua Water" a bill
                    draft.kind = "transfer" if payee.kind == "person" else "bill_payment"
                progressed = True
            elif options:
                progressed = progressed or options != draft.options
                draft.payee_id, draft.options = None, options
            elif problem:
                who = slots.spoken_name or "that name"
                said.append(Say(f"I can't find {who} among your saved payees."))
        elif slots.account_ref and draft.payee_id is None:
            said.append(Say("I can only send money to people on your saved payee list."))
        if progressed:
            self.failures = 0
        elif said or self.mode != "idle":
            self.failures += 1
            if self.failures >= self.max_failures:
                return self._handoff("repeated_failures")
        return said + self._advance(turn)

    def _resolve(
        self, slots: _Slots, options: tuple[str, ...]
    ) -> tuple[str | None, tuple[str, ...], bool]:
        """(the payee chosen, or the ids to ask about, or True when nothing fits)."""
        own = {p.id: p for p in self.view.payees}
        candidates = [(i, s) for i, s in slots.candidates if i in own]
        if options and any(i in options for i, _ in candidates):
            candidates = [(i, s) for i, s in candidates if i in options]
        if slots.spoken_name:
            said = fold_name(slots.spoken_name)
            exact = [i for i, _ in candidates if fold_name(own[i].name) == said]
            if len(exact) == 1:
                return exact[0], (), False
        candidates = [(i, s) for i, s in candidates if s >= MIN_RECIPIENT_SCORE]
        if not candidates:
            return None, (), True
        best = max(s for _, s in candidates)
        close = [i for i, s in candidates if best - s < RECIPIENT_MARGIN]
        if len(close) == 1:
            return close[0], (), False
        return None, tuple(close[:MAX_OPTIONS]), False

    def _advance(self, turn: int) -> list[Effect]:
        """Ask for the next missing slot, or check the action and read it back."""
        draft = self.draft
        assert draft is not None
        view = self.view
        if draft.kind in MONEY_ACTIONS:
            if draft.payee_id is None:
                if draft.options:
                    names = [p.name for i in draft.options if (p := view.payee(i))]
                    return self._ask(f"Did you mean {_names(names)}?", "disambiguating")
                if draft.kind == "transfer":
                    return self._ask("Who would you like to send money to?")
                billers = [p.name for p in view.payees if p.kind == "biller"]
                return self._ask(f"Which bill would you like to pay: {_names(billers)}?")
            payee = view.payee(draft.payee_id)
            assert payee is not None
            if draft.amount is None:
                if payee.amount_due_minor and payee.due_currency:
                    draft.amount = Money(payee.amount_due_minor, payee.due_currency)
                else:
                    verb = "send to" if draft.kind == "transfer" else "pay"
                    return self._ask(f"How much would you like to {verb} {payee.name}?")
            account = next((a for a in view.accounts if a.currency == draft.amount.currency), None)
            action = Action(
                draft.kind,
                view.customer_id,
                account_id=account.id if account else None,
                payee_id=payee.id,
                amount=draft.amount,
            )
        else:
            locked = draft.kind == "unlock_card"
            cards = sorted(view.cards, key=lambda c: c.locked != locked)
            if not cards:
                self._reset()
                return [Say("I can't find a card on your accounts.")]
            action = Action(draft.kind, view.customer_id, card_id=cards[0].id)
        aid = action_id(self.call_key, turn, action)
        refusal = policy.check(action, view, require_confirmation=False)
        if refusal is not None:
            return self._refused(aid, action, refusal)
        self.pending = Pending(action, aid, self._readback(action))
        self.mode = "confirming"
        self.question = self.pending.readback
        return [SavePending(self.pending), Say(self.pending.readback)]

    def _refused(self, aid: str, action: Action, refusal: policy.Refusal) -> list[Effect]:
        effects: list[Effect] = [RecordRefusal(aid, action, refusal), Say(refusal.reason)]
        self.failures += 1
        if self.failures >= self.max_failures:
            return [*effects, *self._handoff("repeated_failures")]
        draft = self.draft
        assert draft is not None
        if refusal.code in _AMOUNT_REFUSALS:
            draft.amount = None
            return [*effects, *self._ask("What amount would you like instead?")]
        if refusal.code == "unknown_payee":
            draft.payee_id = None
            return [*effects, *self._ask("Who would you like to send money to?")]
        self._reset()
        return effects

    def _readback(self, action: Action) -> str:
        if action.kind in MONEY_ACTIONS:
            assert action.amount is not None
            payee = self.view.payee(action.payee_id)
            account = self.view.account(action.account_id)
            verb = "Send" if action.kind == "transfer" else "Pay"
            money = spoken_money(action.amount.minor, action.amount.currency)
            source = f" from your {account.name}" if account else ""
            return f"{verb} {money} to {payee.name if payee else 'them'}{source}?"
        card = self.view.card(action.card_id)
        verb = "Lock" if action.kind == "lock_card" else "Unlock"
        return f"{verb} your {card.kind} card ending {card.last4}?" if card else f"{verb} it?"

    def _done_words(self, action: Action, *, past: bool = False) -> str:
        if action.kind in MONEY_ACTIONS:
            assert action.amount is not None
            money = spoken_money(action.amount.minor, action.amount.currency)
            payee = self.view.payee(action.payee_id)
            name = payee.name if payee else "them"
            if past:
                return f"{money} went to {name}"
            verb = "sent" if action.kind == "transfer" else "paid"
            return f"I've {verb} {money} to {name}"
        card = self.view.card(action.card_id)
        what = f"your {card.kind} card ending {card.last4}" if card else "your card"
        state = "locked" if action.kind == "lock_card" else "unlocked"
        return f"{what} is {state}" if past else f"{what[0].upper()}{what[1:]} is now {state}"

    # --- small moves --------------------------------------------------------------------

    def _ask(self, question: str, mode: Mode = "collecting") -> list[Effect]:
        self.mode = mode
        self.question = question
        return [Say(question)]

    def _switch(self, u: Understanding, turn: int) -> list[Effect]:
        """A different request in the middle of one: drop the old one and start the new."""
        effects: list[Effect] = (
            [ClearPending("replaced by another request")] if self.pending else []
        )
        self._reset()
        return [*effects, *self._idle(u, turn)]

    def _cancel(self) -> list[Effect]:
        had_pending = self.pending is not None
        money = self.draft is not None and self.draft.kind in MONEY_ACTIONS
        self._reset()
        self.failures = 0
        effects: list[Effect] = [ClearPending()] if had_pending else []
        nothing = "Nothing was sent." if money else "Nothing was changed."
        return [*effects, Say(f"Okay, I've cancelled that. {nothing}")]

    def _failed(self, effects: list[Effect]) -> list[Effect]:
        self.failures += 1
        if self.failures >= self.max_failures:
            return self._handoff("repeated_failures")
        return effects

    def _handoff(self, reason: str) -> list[Effect]:
        effects: list[Effect] = [ClearPending("handed off to a colleague")] if self.pending else []
        self._reset()
        self.mode = "handed_off"
        if reason == "requested":
            text = "Of course. I'm putting you through to a colleague now."
        else:
            text = "I'm sorry, I'm not getting this right. Let me put you through to a colleague."
        return [*effects, Handoff(reason), Say(text)]

    def _reset(self) -> None:
        self.mode = "idle"
        self.draft = None
        self.pending = None
        self.question = ""

    # --- information ----------------------------------------------------------------

    def _info(self, intent: str) -> list[Effect]:
        view = self.view
        if intent == "check_balance":
            if not view.accounts:
                return [Say("I can't find any accounts for you.")]
            return [
                Say(f"Your {a.name} has {spoken_money(a.balance_minor, a.currency)}.")
                for a in view.accounts
            ]
        recent = view.recent[:3]
        if not recent:
            return [Say("There are no recent transactions on your accounts.")]
        said: list[Effect] = [Say(f"Your last {_COUNT.get(len(recent), len(recent))}:")]
        for t in recent:
            when = _spoken_date(t.posted_at)
            money = spoken_money(abs(t.amount_minor), t.currency)
            direction = "in" if t.amount_minor > 0 else "out"
            said.append(Say(f"{when}, {t.description}, {money} {direction}."))
        return said

    def execution_failed(self) -> list[Effect]:
        """The bank could not be reached or failed: nothing is known to have happened."""
        self._reset()
        return [
            Say("Sorry, I couldn't complete that just now."),
            Say("Please check your recent transactions before trying again."),
        ]

    def snapshot(self) -> dict[str, Any]:
        """For logs and tests."""
        return {
            "mode": self.mode,
            "draft": self.draft,
            "pending": self.pending.action_id if self.pending else None,
            "failures": self.failures,
        }


_COUNT = {1: "transaction", 2: "two transactions", 3: "three transactions"}


def _spoken_date(iso: str) -> str:
    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    return f"{moment.day} {moment.strftime('%B')}"


__all__ = [
    "ClearPending",
    "Dialogue",
    "Draft",
    "Effect",
    "Execute",
    "Handoff",
    "Pending",
    "RecordRefusal",
    "SavePending",
    "Say",
]
