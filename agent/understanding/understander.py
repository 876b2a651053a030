"""The fast path: one utterance in, one Understanding out, with no LLM and no I/O.

Order of work: clean the text (emoji out, length capped, scripts checked), tokenise, exact
rules for yes/no/cancel, the linear intent model otherwise, then the normalisers (account
reference, money, date), the name spans and the payee lookup, and last the checks that
set `ambiguity_reason` (missing slot, close candidates, low confidence, conflicting or
implausible amounts, bad input). Anything with a reason should go to the LLM path or a
clarifying question; nothing with a reason is ever a confident action.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from agent.understanding.dates import find_date
from agent.understanding.entities import (
    FILLERS,
    find_account_ref,
    find_company,
    find_person,
)
from agent.understanding.linear import LinearModel
from agent.understanding.money import find_amounts, is_plausible, to_minor
from agent.understanding.payees import Candidate, Payee, PayeeIndex
from agent.understanding.phonetic import fold_name
from agent.understanding.rules import (
    DANGLING,
    imperative_verb,
    leading_reply,
    polarity,
    yes_no,
)
from agent.understanding.tokens import tokenize
from agent.understanding.trace import TraceEntry

MODEL_DIR = Path(__file__).resolve().parent / "model"
MAX_CHARS = 1000
ACTION_INTENTS = frozenset(
    {
        "check_balance",
        "recent_transactions",
        "transfer_money",
        "pay_bill",
        "lock_card",
        "unlock_card",
    }
)
CONFIRM_REQUIRED = frozenset({"transfer_money", "pay_bill", "lock_card", "unlock_card"})
MONEY_INTENTS = frozenset({"transfer_money", "pay_bill"})
MIN_INTENT_CONFIDENCE = 0.5
MIN_RECIPIENT_SCORE = 0.75
RECIPIENT_MARGIN = 0.06
CAPPED_CONFIDENCE = 0.4  # the most an action may claim when something is wrong with it

Completeness = Literal["complete", "incomplete", "unknown"]
# "... to my savings", "into checking": a transfer between the caller's own accounts
_OWN_ACCOUNT_RE = re.compile(
    r"\b(?:to|into|over to)\s+(?:my\s+|the\s+|our\s+)?"
    r"(?:savings|checking|chequing|current|joint|business|other|isa)\b"
)


@dataclass(slots=True)
class Understanding:
    intent: str
    confidence: float
    topic: str | None = None
    entities: dict[str, Any] = field(default_factory=dict)
    needs_confirmation: bool = False
    ambiguity_reason: str | None = None
    path: str = "fast"
    trace: list[TraceEntry] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "confidence": round(float(self.confidence), 4),
            "topic": self.topic,
            "entities": self.entities,
            "needs_confirmation": self.needs_confirmation,
            "ambiguity_reason": self.ambiguity_reason,
            "path": self.path,
            "trace": [t.to_dict() for t in self.trace],
        }


def _kind(index: PayeeIndex, payee_id: str) -> str:
    return next((p.kind for p in index.payees if p.id == payee_id), "person")


def toks_have_numbers(toks: list) -> bool:
    return any(t.kind in ("num", "sym", "time", "ord") for t in toks)


def _clean(text: str) -> tuple[str, int, bool]:
    """(text without emoji/pictographs, how many were removed, non-Latin letters present)."""
    out = []
    removed = 0
    foreign = False
    for c in text:
        cat = unicodedata.category(c)
        if cat in ("So", "Sk", "Cs", "Co", "Cn", "Cc", "Cf", "Mn", "Me") and c not in "\t\n":
            removed += 1
            out.append(" ")
            continue
        if c.isalpha() and c not in "円" and not ("a" <= c.lower() <= "z"):
            name = unicodedata.name(c, "")
            if "LATIN" not in name:
                foreign = True
        out.append(c)
    return "".join(out), removed, foreign


class Understander:
    """Loads the committed model artefacts once; `understand` is pure and thread-safe."""

    _cache: dict[Path, Understander] = {}  # noqa: RUF012 - process-wide, guarded by _lock
    _lock = threading.Lock()

    def __init__(self, intent: LinearModel, topic: LinearModel, lexicon: frozenset[str]):
        self.intent_model = intent
        self.topic_model = topic
        self.lexicon = lexicon
        self._index_cache: dict[tuple[Payee, ...], PayeeIndex] = {}
        self._index_lock = threading.Lock()

    @classmethod
    def load(cls, model_dir: Path | None = None) -> Understander:
        path = Path(model_dir or MODEL_DIR)
        with cls._lock:
            if path not in cls._cache:
                lexicon = frozenset(json.loads((path / "lexicon.json").read_text("utf-8")))
                cls._cache[path] = cls(
                    LinearModel(path / "intent.npz"), LinearModel(path / "topic.npz"), lexicon
                )
            return cls._cache[path]

    # -- payee index ----------------------------------------------------------------------

    def payee_index(self, payees: Sequence[Payee] | PayeeIndex) -> PayeeIndex:
        """The index for a payee list; the last few are kept, so a call builds it once."""
        if isinstance(payees, PayeeIndex):
            return payees
        key = tuple(payees)
        with self._index_lock:
            index = self._index_cache.get(key)
        if index is None:
            index = PayeeIndex(key)
            with self._index_lock:
                if len(self._index_cache) >= 16:
                    self._index_cache.pop(next(iter(self._index_cache)))
                self._index_cache[key] = index
        return index

    # -- the fast path --------------------------------------------------------------------

    def understand(
        self,
        text: str,
        *,
        payees: Sequence[Payee] | PayeeIndex = (),
        now: datetime | None = None,
        default_currency: str | None = None,
    ) -> Understanding:
        try:
            return self._understand(text, payees, now, default_currency)
        except Exception as exc:  # never raise into the call: degrade to a clarifying turn
            return Understanding(
                "out_of_scope",
                0.0,
                ambiguity_reason="internal_error",
                trace=[TraceEntry(str(text)[:80], type(exc).__name__, "error")],
            )

    def _understand(
        self,
        text: Any,
        payees: Sequence[Payee] | PayeeIndex,
        now: datetime | None,
        default_currency: str | None,
    ) -> Understanding:
        reasons: list[str] = []
        trace: list[TraceEntry] = []
        if not isinstance(text, str):
            text = "" if text is None else str(text)
        if len(text) > MAX_CHARS:
            trace.append(TraceEntry(text[:20] + "...", len(text), "input:truncated"))
            text = text[:MAX_CHARS]
            reasons.append("input_too_long")
        clean, removed, foreign = _clean(text)
        if removed:
            trace.append(TraceEntry("", removed, "input:removed_symbols"))
        if foreign:
            reasons.append("unsupported_script")
        toks = tokenize(clean)
        words = [t.text for t in toks if t.kind == "word"]
        content = [w for w in words if w not in FILLERS] + [
            t.text for t in toks if t.kind in ("num", "time", "ord", "sym")
        ]
        if not content:
            reason = "empty_input" if not clean.strip() else "no_content"
            return Understanding("out_of_scope", 0.0, ambiguity_reason=reason, trace=trace)

        yn = yes_no(words)
        topic = None
        if yn is not None:
            intent, confidence = yn, 0.99
            trace.append(TraceEntry(clean.strip(), intent, "intent:rule_yes_no"))
        else:
            intent, confidence = self.intent_model.top(clean, 1)[0]
            trace.append(TraceEntry("", f"{intent}:{confidence:.3f}", "intent:linear"))
            lead = leading_reply(words)
            if (
                lead is None
                and (intent in ("out_of_scope", "confirm", "deny") or confidence < 0.8)
                and intent not in ACTION_INTENTS
                and "?" not in clean
                and not toks_have_numbers(toks)
            ):
                lead = polarity(words)  # "this is a true statement", "that is not correct"
            if lead == "deny" or (lead == "confirm" and intent not in ACTION_INTENTS):
                # "no, leave them be": a reply that opens with no is never an action
                trace.append(TraceEntry(words[0], lead, "intent:rule_leading_reply"))
                intent, confidence = lead, max(confidence, 0.9)
            elif not any(w in self.lexicon for w in words if w not in FILLERS):
                # Only unknown words ("yusuf", "nobu"): the character n-grams alone must not
                # make a name into a "yes" or a "no", nor anything else confident.
                if intent in ("confirm", "deny"):
                    intent = "out_of_scope"
                confidence = min(confidence, CAPPED_CONFIDENCE)
                reasons.append("low_intent_confidence")
                trace.append(TraceEntry(clean.strip(), intent, "intent:unknown_words"))
            elif confidence < MIN_INTENT_CONFIDENCE:
                reasons.append("low_intent_confidence")
        if intent == "faq":
            topic, _tp = self.topic_model.top(clean, 1)[0]

        entities: dict[str, Any] = {}
        skip: set[int] = set()
        ref = find_account_ref(clean, toks)
        if ref is not None:
            digits, span = ref
            entities["account_ref"] = digits
            skip.update(range(span.tok_start, span.tok_end))
            trace.append(TraceEntry(span.text, digits, span.rule))

        if isinstance(now, datetime):
            today = now.date()
        elif isinstance(now, date):
            today = now
        else:  # no reference given: the only clock read in the stage, at its edge
            today = datetime.now().date()
        dm = find_date(toks, today)
        if dm is not None:
            entities["date"] = dm.value.isoformat()
            skip.update(range(dm.tok_start, dm.tok_end))
            surface = clean[toks[dm.tok_start].start : toks[dm.tok_end - 1].end]
            trace.append(TraceEntry(surface, entities["date"], dm.rule))

        amounts = find_amounts(clean, toks, frozenset(skip))
        if amounts:
            explicit = [a for a in amounts if a.explicit_currency]
            chosen = (explicit or amounts)[0]
            trace.extend(chosen.trace)
            currency = chosen.currency
            if currency is None:
                currency = default_currency
                trace.append(
                    TraceEntry(
                        chosen.surface(clean),
                        currency,
                        "currency:account_default" if currency else "currency:unspecified",
                    )
                )
            minor, exact = to_minor(chosen.value, currency)
            entities["amount"] = {"minor": minor, "currency": currency}
            trace.append(TraceEntry(chosen.surface(clean), minor, "amount:minor_units"))
            if chosen.value <= 0:
                reasons.append("negative_amount" if chosen.value < 0 else "zero_amount")
            elif not is_plausible(chosen.value, currency):
                reasons.append("implausible_amount")
            elif not exact:
                reasons.append("fractional_minor_units")
            if chosen.ambiguous:
                reasons.append("ambiguous_amount")
            distinct = {(a.value, a.currency) for a in (explicit or amounts)}
            if intent in MONEY_INTENTS and len(distinct) > 1:
                reasons.append("conflicting_amounts")

        person = find_person(clean, toks, self.lexicon)
        if person is not None:
            entities["person"] = person.text
            trace.append(TraceEntry(person.text, person.text, person.rule))
        company = find_company(clean, toks) if intent == "pay_bill" or person is None else None
        if company is not None and (intent == "pay_bill" or company.rule != "company:before_bill"):
            entities["company"] = company.text
            trace.append(TraceEntry(company.text, company.text, company.rule))

        candidates: list[Candidate] = []
        index = self.payee_index(payees) if payees else None
        if index is not None and len(index):
            query = None
            if intent == "pay_bill" and "company" in entities:
                query = entities["company"]
            elif person is not None:
                query = person.text
            elif "company" in entities:
                query = entities["company"]
            elif len(content) <= 3 and intent not in ("confirm", "deny"):
                query = clean  # a bare reply to "who to?": "Ken", "Satoh"
            if query:
                candidates = index.search(query, k=3)
                if query is clean:  # a bare reply is only a name if it clearly is one
                    candidates = [c for c in candidates if c.score >= MIN_RECIPIENT_SCORE]
                exact_names = [c for c in candidates if fold_name(c.name) == fold_name(query)]
                if len(exact_names) == 1:  # "ken sato" said, Ken Sato and Ken Saito saved
                    top = exact_names[0]
                    rest = [c for c in candidates if c is not top]
                    candidates = [Candidate(top.id, top.name, 1.0), *rest]
            if candidates:
                entities["recipient_candidates"] = [c.to_dict() for c in candidates]
                trace.append(TraceEntry(query or "", candidates[0].id, "recipient:fuzzy_phonetic"))

        own_account = _OWN_ACCOUNT_RE.search(clean.lower()) is not None
        verb = imperative_verb(words) if yn is None and "?" not in clean else None
        if (
            verb is not None
            and "amount" in entities
            and ("person" in entities or "company" in entities or candidates or own_account)
            and intent not in ("confirm", "deny")
        ):
            # "send forty two fifty to ken satoh": verb + amount + recipient is a transfer,
            # whatever the n-gram model made of the number words and the name
            billish = "company" in entities or (
                candidates and index is not None and _kind(index, candidates[0].id) == "biller"
            )
            intent = "pay_bill" if verb == "pay" and billish else "transfer_money"
            confidence, topic = max(confidence, 0.85), None
            trace.append(TraceEntry(verb, intent, "intent:rule_verb_amount_recipient"))
            reasons = [r for r in reasons if r != "low_intent_confidence"]
        self._slot_checks(intent, entities, candidates, index, reasons, own_account)
        if reasons and intent in ACTION_INTENTS:
            confidence = min(confidence, CAPPED_CONFIDENCE)
        for r in reasons:
            trace.append(TraceEntry("", r, "ambiguity"))
        return Understanding(
            intent=intent,
            confidence=confidence,
            topic=topic,
            entities=entities,
            needs_confirmation=intent in CONFIRM_REQUIRED,
            ambiguity_reason=reasons[0] if reasons else None,
            trace=trace,
        )

    @staticmethod
    def _slot_checks(
        intent: str,
        entities: dict[str, Any],
        candidates: list[Candidate],
        index: PayeeIndex | None,
        reasons: list[str],
        own_account: bool = False,
    ) -> None:
        if intent == "transfer_money":
            if "amount" not in entities:
                reasons.append("missing_amount")
            has_payees = index is not None and len(index) > 0 and not own_account
            if (
                "person" not in entities
                and not candidates
                and "company" not in entities
                and not own_account
            ):
                reasons.append("missing_recipient")
            elif has_payees and not candidates:
                reasons.append("unknown_recipient")
        elif intent == "pay_bill":
            if not candidates and "company" not in entities and "person" not in entities:
                reasons.append("missing_biller")
        if intent in MONEY_INTENTS and candidates:
            top = candidates[0].score
            if top < MIN_RECIPIENT_SCORE:
                reasons.append("unknown_recipient")
            elif (
                len(candidates) > 1
                and top - candidates[1].score < RECIPIENT_MARGIN
                and not (top == 1.0 and candidates[1].score < 1.0)
            ):
                reasons.append("ambiguous_recipient")

    # -- adaptive end of turn -------------------------------------------------------------

    def turn_completeness(
        self, text: str, *, payees: Sequence[Payee] | PayeeIndex = ()
    ) -> Completeness:
        """'complete' when the text is already a whole command, 'incomplete' when cut off."""
        return self.completeness(text, self.understand(text, payees=payees))

    @staticmethod
    def completeness(text: str, understanding: Understanding) -> Completeness:
        """turn_completeness from an understanding of `text` already at hand (no second pass)."""
        cut = dangling(text, understanding)
        return cut if cut is not None else completeness_of(understanding)


# Verbs that leave a command unfinished ("I want to transfer") but end a question whole
# ("what is the fee for an international transfer").
_ACTION_VERBS = frozenset(
    {
        "pay",
        "send",
        "transfer",
        "move",
        "wire",
        "give",
        "lock",
        "unlock",
        "freeze",
        "block",
        "check",
        "show",
        "tell",
    }
)


def dangling(text: str, understanding: Understanding | None = None) -> Completeness | None:
    """'incomplete' when the text ends mid-phrase ("send two hundred pounds to"), 'unknown'
    when it is empty, None when the words alone do not tell."""
    toks = tokenize(_clean(text or "")[0])
    words = [t for t in toks if t.kind != "punct"]
    if not words:
        return "unknown"
    last = words[-1]
    if last.kind == "word" and last.text in DANGLING:
        if (
            last.text in _ACTION_VERBS
            and understanding is not None
            and understanding.intent not in ACTION_INTENTS
        ):
            return None
        return "incomplete"
    if last.kind == "sym" and last.text in "$£€¥":
        return "incomplete"
    return None


def completeness_of(u: Understanding) -> Completeness:
    """Whether an understood (not dangling) text already holds a whole command."""
    if u.intent in ("confirm", "deny") and u.confidence >= 0.9:
        return "complete"
    if u.intent == "human_handoff" and u.confidence >= 0.8:
        return "complete"
    if u.intent in ACTION_INTENTS:
        # "send fifty pounds" usually goes on ("... to Ken"); "send the money to Ken" is a
        # finished sentence that lacks an amount, which the dialogue asks for: waiting a
        # second after it was measured to add only delay.
        if u.ambiguity_reason in ("missing_recipient", "missing_biller"):
            return "incomplete" if u.confidence >= 0.4 else "unknown"
        if u.ambiguity_reason is None and u.confidence >= 0.8:
            return "complete"
    return "unknown"


def turn_completeness(text: str, *, payees: Sequence[Payee] | PayeeIndex = ()) -> Completeness:
    return Understander.load().turn_completeness(text, payees=payees)
