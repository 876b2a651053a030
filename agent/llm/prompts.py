"""Prompts for the LLM path, laid out for the server's prefix cache.

Everything that is the same for every call comes first and never changes: the system
prompt with the rules, the description of the output and the worked examples. Everything
that varies (the transcript, the candidates, the account context, the FAQ passages) comes
last, in the final user message. No timestamps, call ids or candidate ids appear in the
prefix, so on SGLang (RadixAttention) and llama-server (prompt cache) the prefix is
computed once and reused by every later request; the per-request JSON schema travels in
``response_format`` and constrains decoding without touching the prompt.

``tests/test_llm_prompts.py`` asserts that two different requests render a byte-identical
prefix; the client logs the server's cached-token count for each request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The command set (docs/ARCHITECTURE.md, DESIGN.md); the schema's intent enum.
INTENTS: tuple[str, ...] = (
    "check_balance",
    "recent_transactions",
    "transfer_money",
    "pay_bill",
    "lock_card",
    "unlock_card",
    "human_handoff",
    "faq",
    "confirm",
    "deny",
    "out_of_scope",
)
CURRENCIES: tuple[str, ...] = ("JPY", "USD", "EUR", "GBP", "none")
AMBIGUITIES: tuple[str, ...] = ("none", "recipient", "amount", "intent", "other")
NO_RECIPIENT = "none"
MAX_CANDIDATES = 8  # more names than this in one prompt only confuse a small model
MAX_TEXT_CHARS = 400  # the transcript is cut here (the fast path caps at 1000)

EXTRACTION_SYSTEM = """\
You are the understanding step of a bank's phone assistant. A caller said something that \
the fast rules could not settle. Read the caller's words and fill in one JSON object.

Fields, in this order:
- intent: what the caller wants, one of: check_balance, recent_transactions, \
transfer_money, pay_bill, lock_card, unlock_card, human_handoff, faq, confirm, deny, \
out_of_scope.
- recipient_id: for transfer_money or pay_bill, the id of the one candidate the caller \
means, copied exactly from the candidate list; "none" when no candidate fits or the \
request has no recipient.
- amount: the amount of money the caller said, as a plain number (five thousand -> \
5000, twelve fifty -> 12.5); 0 when no amount was said. Never guess an amount.
- currency: JPY, USD, EUR or GBP when the caller said one, else "none".
- needs_confirmation: true for transfer_money, pay_bill, lock_card and unlock_card.
- ambiguity: "none" when the request is clear; "recipient" when two or more candidates \
fit equally and nothing in the words or the account context tells them apart; "amount" \
or "intent" when that part is unclear; "other" for anything else.

Rules:
- Choose a recipient only from the candidate list; a name that is not on it is "none".
- The account context may make one candidate more likely (for example the payee the \
caller paid last time); use it only when the words fit that candidate too.
- Speech recognition makes mistakes: a name that sounds like a candidate ("Ken Sado" for \
Ken Sato) may mean that candidate.
- Output only the JSON object.

Example 1
Candidates:
- c1: Ken Sato
- c2: Ken Saito
Account context:
- last transfer: c2 (Ken Saito), 3000 JPY
Caller: "send three thousand yen to ken again like last time"
{"intent": "transfer_money", "recipient_id": "c2", "amount": 3000, "currency": "JPY", \
"needs_confirmation": true, "ambiguity": "none"}

Example 2
Candidates:
- c1: Anna Lee
- c2: Anne Leigh
Account context:
- none
Caller: "pay anna"
{"intent": "transfer_money", "recipient_id": "none", "amount": 0, "currency": "none", \
"needs_confirmation": true, "ambiguity": "recipient"}

Example 3
Candidates:
- none
Account context:
- none
Caller: "could you stop my card from working for now"
{"intent": "lock_card", "recipient_id": "none", "amount": 0, "currency": "none", \
"needs_confirmation": true, "ambiguity": "none"}
"""

QNA_SYSTEM = """\
You are the voice of a bank's phone assistant answering a caller's question. Your words \
are spoken aloud by a speech synthesiser.

Rules:
- Answer from the passages given with the question and from nothing else.
- Speak plainly in one to three short sentences. No lists, no markdown, no URLs.
- If the passages do not answer the question, say that you don't have that information \
and offer to connect the caller with a colleague.
- Never ask for or repeat a PIN, password or full card number.
- Never promise to move money or change anything; the caller can ask for that directly.
"""


@dataclass(frozen=True, slots=True)
class CandidateView:
    """A recipient the model may choose: the id it must copy and the name it reads."""

    id: str
    name: str


def as_candidates(candidates: Sequence[Any]) -> list[CandidateView]:
    """Payee, Candidate, (id, name) pairs or mappings -> CandidateView, unique ids."""
    out: list[CandidateView] = []
    seen: set[str] = set()
    for c in candidates:
        if isinstance(c, CandidateView):
            view = c
        elif isinstance(c, Mapping):
            view = CandidateView(str(c["id"]), str(c.get("name", c["id"])))
        elif isinstance(c, tuple):
            view = CandidateView(str(c[0]), str(c[1]))
        else:
            view = CandidateView(str(c.id), str(c.name))
        if view.id and view.id not in seen and view.id != NO_RECIPIENT:
            seen.add(view.id)
            out.append(view)
    return out[:MAX_CANDIDATES]


def extraction_schema(
    candidate_ids: Sequence[str], intents: Sequence[str] = INTENTS
) -> dict[str, Any]:
    """The per-request JSON schema: the recipient is an enum of the real candidate ids
    (plus "none"), so the model cannot invent one; the intent an enum of the intent set.
    Shallow on purpose: grammar-constrained decoding of flat objects is fast and small
    models fill them reliably."""
    return {
        "type": "object",
        "properties": {
            "intent": {"type": "string", "enum": list(intents)},
            "recipient_id": {"type": "string", "enum": [*candidate_ids, NO_RECIPIENT]},
            "amount": {"type": "number", "minimum": 0},
            "currency": {"type": "string", "enum": list(CURRENCIES)},
            "needs_confirmation": {"type": "boolean"},
            "ambiguity": {"type": "string", "enum": list(AMBIGUITIES)},
        },
        "required": [
            "intent",
            "recipient_id",
            "amount",
            "currency",
            "needs_confirmation",
            "ambiguity",
        ],
        "additionalProperties": False,
    }


def response_format(schema: Mapping[str, Any], name: str = "understanding") -> dict[str, Any]:
    """OpenAI's structured-output envelope, as SGLang and llama-server accept it."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema)}}


def _lines(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "- none"


def render_context(account_context: Any) -> list[str]:
    """Account context as short lines: a string, lines, or a mapping of label -> value."""
    if not account_context:
        return []
    if isinstance(account_context, str):
        return [line.strip() for line in account_context.splitlines() if line.strip()]
    if isinstance(account_context, Mapping):
        return [f"{k}: {v}" for k, v in account_context.items() if v not in (None, "")]
    return [str(line) for line in account_context if str(line).strip()]


def extraction_messages(
    text: str,
    candidates: Sequence[CandidateView],
    account_context: Any = None,
    *,
    hint: str | None = None,
) -> list[dict[str, str]]:
    """[fixed system prompt, variable user message]; the variable part is last."""
    spoken = " ".join(text.split())[:MAX_TEXT_CHARS].replace('"', "'")
    parts = [
        "Candidates:",
        _lines([f"{c.id}: {c.name}" for c in candidates]),
        "Account context:",
        _lines(render_context(account_context)),
    ]
    if hint:
        parts += ["Note:", f"- {hint}"]
    parts.append(f'Caller: "{spoken}"')
    return [
        {"role": "system", "content": EXTRACTION_SYSTEM},
        {"role": "user", "content": "\n".join(parts)},
    ]


def qna_messages(question: str, passages: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """[fixed system prompt, passages + question]; passages are (question, answer)."""
    numbered = [f"[{i}] Q: {q}\nA: {a}" for i, (q, a) in enumerate(passages, 1)]
    spoken = " ".join(question.split())[:MAX_TEXT_CHARS]
    body = "Passages:\n" + ("\n\n".join(numbered) if numbered else "(none)")
    return [
        {"role": "system", "content": QNA_SYSTEM},
        {"role": "user", "content": f"{body}\n\nCaller's question: {spoken}"},
    ]
