"""Spoken-style read-back of what was understood, as short phrases.

Phrases are sent as response deltas one by one, so a speech synthesiser can start on
the first. :func:`reply_phrases` is the context-free read-back of one understanding (it never
claims an action happened); the dialogue (agent/dialogue/state.py) builds its replies
from :func:`spoken_money` and :func:`currency_name`.
"""

from __future__ import annotations

from typing import Any

from agent.bank.directory import CustomerProfile
from agent.understanding import Understanding

# ISO 4217 minor-unit exponents for the currencies we speak; default 2.
_EXPONENT = {"JPY": 0, "KRW": 0}
_CURRENCY_WORDS = {"GBP": "pounds", "USD": "dollars", "EUR": "euros", "JPY": "yen"}


_SINGULAR = {"GBP": "pound", "USD": "dollar", "EUR": "euro", "JPY": "yen"}
# Currencies the caller might name that the bank does not hold: for refusals.
_OTHER_CURRENCIES = {
    "CHF": "Swiss francs", "AUD": "Australian dollars", "CAD": "Canadian dollars",
    "CNY": "yuan", "KRW": "won", "INR": "rupees", "SGD": "Singapore dollars",
    "HKD": "Hong Kong dollars", "NZD": "New Zealand dollars", "SEK": "Swedish kronor",
}  # fmt: skip


def currency_name(currency: str | None) -> str:
    """'pounds', 'yen', 'Swiss francs'; the code itself for one we have no word for."""
    code = currency or ""
    return _CURRENCY_WORDS.get(code) or _OTHER_CURRENCIES.get(code) or code or "that currency"


def spoken_money(minor: int, currency: str | None) -> str:
    exponent = _EXPONENT.get(currency or "", 2)
    units, cents = divmod(abs(minor), 10**exponent) if exponent else (abs(minor), 0)
    amount = f"{units:,}" + (f".{cents:0{exponent}d}" if cents else "")
    if units == 1 and not cents and currency in _SINGULAR:
        word = _SINGULAR[currency]
    else:
        word = _CURRENCY_WORDS.get(currency or "", currency or "")
    return f"{'minus ' if minor < 0 else ''}{amount} {word}".strip()


def _candidate_names(entities: dict[str, Any], profile: CustomerProfile | None) -> list[str]:
    names = {p.id: p.name for p in profile.payees} if profile else {}
    ids = [c["id"] for c in entities.get("recipient_candidates") or []]
    return [names[i] for i in ids if i in names]


def _recipient(entities: dict[str, Any], profile: CustomerProfile | None) -> str | None:
    names = {p.id: p.name for p in profile.payees} if profile else {}
    candidates = entities.get("recipient_candidates") or []
    if candidates and candidates[0]["id"] in names:
        return names[candidates[0]["id"]]
    return entities.get("person") or entities.get("company")


def reply_phrases(understanding: Understanding, profile: CustomerProfile | None) -> list[str]:
    entities = understanding.entities
    amount = entities.get("amount")
    money = spoken_money(amount["minor"], amount.get("currency")) if amount else None
    recipient = _recipient(entities, profile)
    intent = understanding.intent
    names = _candidate_names(entities, profile)
    if understanding.ambiguity_reason == "ambiguous_recipient" and len(names) >= 2:
        return [f"Did you mean {names[0]} or {names[1]}?"]
    if understanding.ambiguity_reason and intent not in ("faq", "out_of_scope"):
        lead = "I think you want to " + _GOALS.get(intent, "do something with your account")
        return [lead + ".", " Could you say that again with the details?"]
    if intent == "transfer_money":
        parts = ["You'd like to send"]
        parts.append(f" {money}" if money else " money")
        parts.append(f" to {recipient}." if recipient else ".")
        return ["".join(parts)]
    if intent == "pay_bill":
        return [f"You'd like to pay {recipient or 'a bill'}" + (f", {money}." if money else ".")]
    if intent == "faq":
        topic = (understanding.topic or "your question").replace("_", " ")
        return [f"That's a question about {topic}."]
    if intent == "out_of_scope":
        return ["Sorry, I can help with your accounts, payments and cards."]
    return [_READBACK.get(intent, "Okay.")]


_GOALS = {
    "check_balance": "check your balance",
    "recent_transactions": "hear your recent transactions",
    "transfer_money": "send money",
    "pay_bill": "pay a bill",
    "lock_card": "lock your card",
    "unlock_card": "unlock your card",
    "human_handoff": "speak to someone",
}

_READBACK = {
    "check_balance": "You'd like to hear your balance.",
    "recent_transactions": "You'd like to hear your recent transactions.",
    "lock_card": "You'd like to lock your card.",
    "unlock_card": "You'd like to unlock your card.",
    "human_handoff": "You'd like to speak to someone.",
    "confirm": "Okay.",
    "deny": "Okay, I won't do that.",
}
