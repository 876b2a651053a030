"""The routing policy between the fast path, retrieval and the LLM; the pipeline's one
entry point to the LLM path.

    router = Router.build(config.llm)                  # once per process
    u = await router.resolve(u, text=text, candidates=payees,
                             account_context=ctx, on_mark=turn.timings.mark)
    async for delta in router.answer(question, topic=u.topic, on_mark=...):
        ...                                            # response.text.delta
    await router.aclose()

Policy:

* ``resolve``: the fast path's understanding stands unless it reports one of the
  ambiguity reasons in :data:`LLM_REASONS`. Only then, and only with an LLM configured, is
  one structured extraction made: a per-request schema whose recipient enum holds the real
  candidate ids, parsed and checked in code (agent/llm/extraction.py). A valid, confident
  answer returns a new Understanding with ``path="llm"``; anything else (no LLM, timeout,
  outage, invalid or unsure output) returns the fast path's understanding with its
  ambiguity reason intact and a trace entry saying why, so the dialogue asks its
  clarifying question. Never an exception, never silence.
* ``answer``: FAQ retrieval first. A passage that answers on its own is read out directly
  (no LLM); a partial match goes to the LLM with the top passages after the stable
  prefix, and the answer is streamed token by token; no relevant passage, no LLM or a
  failure yields a spoken fallback (the best passage, or the offer of a colleague).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from decimal import Decimal
from typing import Any

from agent.llm import prompts
from agent.llm.client import ChatStream, LLMClient, LLMError, StreamStats, new_rid
from agent.llm.config import LLMConfig
from agent.llm.extraction import Extraction, InvalidExtraction, check_policy, parse
from agent.log import get_logger
from agent.qna.index import FAQIndex, Hit, spoken_answer
from agent.understanding import Understanding
from agent.understanding.money import find_amounts, to_minor
from agent.understanding.phonetic import fold_name
from agent.understanding.tokens import tokenize
from agent.understanding.trace import TraceEntry
from agent.understanding.understander import (
    CONFIRM_REQUIRED,
    MIN_RECIPIENT_SCORE,
    MONEY_INTENTS,
    RECIPIENT_MARGIN,
)

log = get_logger("agent.llm.router")

MarkFn = Callable[[str], Any]

# The fast path's ambiguity reasons that an LLM can settle. The others go straight to a
# clarifying question or slot filling: missing_* (ask for it), zero/negative/implausible
# amounts (policy), empty or foreign input (ask again), internal_error.
RECIPIENT_REASONS = frozenset({"ambiguous_recipient", "unknown_recipient"})
LLM_REASONS = RECIPIENT_REASONS | {"low_intent_confidence", "conflicting_amounts"}
LLM_CONFIDENCE = 0.8  # what a validated LLM resolution claims
# Conversational acts a model may never produce: a "yes" that could confirm a payment, a
# "no" that cancels, a handoff the caller did not ask for. The fast path's rules decide
# them from the words; an unsure one is asked about again.
LLM_FORBIDDEN_INTENTS = frozenset({"confirm", "deny", "human_handoff"})
EXACT_SCORE = 0.999  # a payee lookup score this high is the payee's own name

NO_ANSWER = (
    "I'm sorry, I don't have that information. I can connect you with a colleague if you like."
)
FOUND_PREFIX = "Here's what I have on that: "


def llm_reason(u: Understanding) -> str | None:
    """The ambiguity the LLM is asked to settle, or None (the fast path's answer stands).

    The understanding reports only its first reason: "send the money to Ken" says
    missing_amount, yet its two Kens tie too. A money request whose recipient candidates
    tie (or all score low) is a recipient question whatever the first reason was."""
    scores = [float(c.get("score", 0.0)) for c in u.entities.get("recipient_candidates") or ()]
    exact = bool(scores) and scores[0] >= EXACT_SCORE
    if u.ambiguity_reason in LLM_REASONS:
        if u.ambiguity_reason in RECIPIENT_REASONS and exact:
            # The caller said a payee's full name ("Ken Sato"); a near-homophone ("Ken
            # Saito") within the margin is no reason to let a model choose: the exact
            # name stands, and the read-back is where a misheard name gets corrected.
            return None
        return u.ambiguity_reason
    if u.intent in MONEY_INTENTS and not exact:
        if scores and scores[0] < MIN_RECIPIENT_SCORE:
            return "unknown_recipient"
        if len(scores) > 1 and scores[0] - scores[1] < RECIPIENT_MARGIN:
            return "ambiguous_recipient"
    return None


def _mark(on_mark: MarkFn | None, name: str) -> None:
    if on_mark is not None:
        try:
            on_mark(name)
        except Exception:  # a timing hook must never break the turn
            log.exception("llm_mark_failed", stage=name)


class Router:
    def __init__(
        self,
        config: LLMConfig,
        *,
        faq: FAQIndex | None = None,
        client: LLMClient | None = None,
        extraction_client: LLMClient | None = None,
    ) -> None:
        self.config = config
        self.faq = faq if faq is not None else FAQIndex.load()
        self.client = client
        self.extraction_client = extraction_client or client
        self.counts: Counter[str] = Counter()

    @classmethod
    def build(cls, config: LLMConfig, *, faq: FAQIndex | None = None) -> Router:
        """Clients only when a server is configured; none means fast path + retrieval."""
        if not config.base_url:
            return cls(config, faq=faq)
        client = make_client(config, config.base_url)
        extraction = None
        if not config.mtp_for_extraction and config.extraction_base_url:
            extraction = make_client(config, config.extraction_base_url)
        return cls(config, faq=faq, client=client, extraction_client=extraction)

    @property
    def llm_configured(self) -> bool:
        return self.client is not None

    async def aclose(self) -> None:
        clients = {id(c): c for c in (self.client, self.extraction_client) if c is not None}
        for c in clients.values():
            await c.aclose()

    # --- ambiguity --------------------------------------------------------------------

    @staticmethod
    def needs_llm(u: Understanding) -> bool:
        return llm_reason(u) is not None

    async def resolve(
        self,
        understanding: Understanding,
        *,
        text: str,
        candidates: Sequence[Any] = (),
        account_context: Any = None,
        on_mark: MarkFn | None = None,
    ) -> Understanding:
        """The fast path's understanding, or the LLM's validated reading of the same words.

        ``candidates``: the recipients the caller may mean, best first (Payee or Candidate
        objects, (id, name) pairs or {"id", "name"} mappings): the fuzzy lookup's
        candidates, or the caller's whole payee list when it is short.
        ``account_context``: a few lines (string, list or mapping) that may tell candidates
        apart, e.g. the last transfers. ``on_mark`` gets llm_request, llm_first_token and
        llm_done.
        """
        u = understanding
        reason = llm_reason(u)
        if reason is None:
            self.counts["fast"] += 1
            return u
        client = self.extraction_client
        if client is None:
            self.counts["llm_skipped"] += 1
            return _unresolved(u, "no_llm")
        views = prompts.as_candidates(candidates)
        if reason in RECIPIENT_REASONS and not views:
            self.counts["llm_skipped"] += 1
            return _unresolved(u, "no_candidates")
        ids = [v.id for v in views]
        schema = prompts.extraction_schema(ids)
        messages = prompts.extraction_messages(text, views, account_context)
        stream = client.stream(
            messages,
            max_tokens=self.config.extraction_max_tokens,
            temperature=self.config.temperature,
            response_format=prompts.response_format(schema),
            rid=new_rid("x"),
        )
        outcome = "error"
        _mark(on_mark, "llm_request")
        try:
            async with asyncio.timeout(self.config.extraction_budget_ms / 1000):
                async with stream:
                    parts = []
                    async for delta in stream:
                        if not parts:
                            _mark(on_mark, "llm_first_token")
                        parts.append(delta)
            _mark(on_mark, "llm_done")
            extraction = parse("".join(parts), schema, finish_reason=stream.stats.finish_reason)
            check_policy(extraction, candidate_ids=ids, money_intents=MONEY_INTENTS)
            resolved = self._apply(u, extraction, text, views, stream.stats, account_context)
            outcome = "resolved"
            self.counts["llm_resolved"] += 1
            return resolved
        except InvalidExtraction as exc:
            outcome = f"invalid:{exc.reason}"
            self.counts["llm_unresolved"] += 1
            return _unresolved(u, exc.reason, stream.stats)
        except TimeoutError:
            outcome = "budget_exceeded"
            self.counts["llm_error"] += 1
            return _unresolved(u, "llm_budget_exceeded", stream.stats)
        except LLMError as exc:
            outcome = exc.code
            self.counts["llm_error"] += 1
            log.warning("llm_failed", kind="extraction", rid=stream.rid, error=str(exc))
            return _unresolved(u, exc.code, stream.stats)
        finally:
            log.info("llm_request", kind="extraction", outcome=outcome, **stream.stats.to_dict())

    def _apply(
        self,
        u: Understanding,
        ex: Extraction,
        text: str,
        views: Sequence[prompts.CandidateView],
        stats: StreamStats,
        account_context: Any = None,
    ) -> Understanding:
        reason = llm_reason(u)
        intent = ex.intent
        if intent in LLM_FORBIDDEN_INTENTS:
            raise InvalidExtraction("intent_not_allowed", intent)
        if reason in RECIPIENT_REASONS or reason == "conflicting_amounts":
            if intent != u.intent:  # the question was who or how much, not what
                raise InvalidExtraction("intent_changed", f"{u.intent} -> {intent}")
        entities = dict(u.entities)
        trace = list(u.trace)
        if reason in RECIPIENT_REASONS and ex.recipient_id is None:
            raise InvalidExtraction("no_recipient")
        if ex.recipient_id is not None:
            _check_evidence(u, ex.recipient_id, text, views, account_context)
        if ex.recipient_id is not None:
            name = next(v.name for v in views if v.id == ex.recipient_id)
            entities["recipient_candidates"] = [{"id": ex.recipient_id, "score": 1.0}]
            entities["recipient_source"] = "llm"
            trace.append(TraceEntry(name, ex.recipient_id, "recipient:llm"))
        amount = entities.get("amount")
        if ex.amount is not None:
            said = _amounts_in(text, u)
            match = next((a for a in said if a[0] == ex.amount), None)
            if match is not None and (ex.currency is None or match[1] in (None, ex.currency)):
                currency = match[1] or (amount or {}).get("currency") or ex.currency
                minor, exact = to_minor(ex.amount, currency)
                if exact:
                    entities["amount"] = {"minor": minor, "currency": currency}
                    trace.append(TraceEntry(str(ex.amount), minor, "amount:llm_choice"))
            elif reason == "conflicting_amounts":
                raise InvalidExtraction("amount_not_said", str(ex.amount))
            else:  # a number the normaliser did not read from the words is never used
                trace.append(TraceEntry(str(ex.amount), None, "amount:llm_ignored"))
        elif reason == "conflicting_amounts":
            raise InvalidExtraction("no_amount")
        trace.append(TraceEntry("", intent, "intent:llm"))
        trace.append(TraceEntry("", _stats_note(stats), "llm:extraction"))
        remaining = None
        if intent in MONEY_INTENTS:
            if "amount" not in entities and intent == "transfer_money":
                remaining = "missing_amount"
            elif not entities.get("recipient_candidates"):
                remaining = "missing_recipient" if intent == "transfer_money" else None
        return dataclasses.replace(
            u,
            intent=intent,
            confidence=max(LLM_CONFIDENCE, u.confidence) if remaining is None else 0.4,
            entities=entities,
            needs_confirmation=intent in CONFIRM_REQUIRED or ex.needs_confirmation,
            ambiguity_reason=remaining,
            path="llm",
            trace=trace,
        )

    # --- questions --------------------------------------------------------------------

    def retrieve(self, question: str, *, topic: str | None = None) -> list[Hit]:
        return self.faq.search(question, k=max(self.config.faq_passages, 1), topic=topic)

    async def answer(
        self,
        question: str,
        *,
        topic: str | None = None,
        on_mark: MarkFn | None = None,
    ) -> AsyncIterator[str]:
        """The spoken answer to a question, as text deltas; always yields something."""
        cfg = self.config
        hits = self.retrieve(question, topic=topic)
        top = hits[0] if hits else None
        if top is not None and top.confidence >= cfg.faq_direct_score:
            self.counts["faq_direct"] += 1
            yield spoken_answer(top.answer)
            return
        relevant = [h for h in hits if h.confidence >= cfg.faq_min_score]
        fallback = FOUND_PREFIX + spoken_answer(relevant[0].answer, 2) if relevant else NO_ANSWER
        if self.client is None or not relevant:
            self.counts["faq_fallback" if relevant else "faq_none"] += 1
            yield fallback
            return
        self.counts["faq_llm"] += 1
        messages = prompts.qna_messages(question, [(h.question, h.answer) for h in relevant])
        stream = self.client.stream(
            messages,
            max_tokens=cfg.answer_max_tokens,
            temperature=cfg.temperature,
            rid=new_rid("qa"),
        )
        said = False
        outcome = "error"
        _mark(on_mark, "llm_request")
        try:
            async with stream:
                async for delta in _within(
                    stream, time.perf_counter() + cfg.answer_budget_ms / 1000
                ):
                    if not said:
                        _mark(on_mark, "llm_first_token")
                        said = True
                    yield delta
            _mark(on_mark, "llm_done")
            outcome = "done" if said else "empty"
            if not said:
                yield fallback
        except (LLMError, TimeoutError) as exc:
            outcome = getattr(exc, "code", "budget_exceeded")
            self.counts["faq_llm_failed"] += 1
            log.warning("llm_failed", kind="qna", rid=stream.rid, error=str(exc) or outcome)
            yield fallback if not said else " Sorry, I'll stop there."
        finally:
            if stream.stats.cancelled and outcome == "error":
                outcome = "cancelled"
            log.info("llm_request", kind="qna", outcome=outcome, **stream.stats.to_dict())

    def stats(self) -> dict[str, Any]:
        """Counts per route, and the share of ambiguity turns the fast path settled."""
        c = self.counts
        turns = c["fast"] + c["llm_resolved"] + c["llm_unresolved"] + c["llm_error"]
        turns += c["llm_skipped"]
        return {
            **dict(c),
            "fast_share": round(c["fast"] / turns, 4) if turns else None,
            "llm_share": round((turns - c["fast"] - c["llm_skipped"]) / turns, 4)
            if turns
            else None,
        }


async def _within(stream: ChatStream, deadline: float) -> AsyncIterator[str]:
    """The stream's deltas until the deadline. The timeout wraps each wait for the next
    delta only, never the consumer's own work between deltas."""
    deltas = stream.__aiter__()
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise TimeoutError
        try:
            async with asyncio.timeout(remaining):
                delta = await anext(deltas)
        except StopAsyncIteration:
            return
        yield delta


def make_client(config: LLMConfig, base_url: str) -> LLMClient:
    kwargs: dict[str, Any] = {}
    if config.send_chat_template_kwargs:
        kwargs["chat_template_kwargs"] = {"enable_thinking": config.thinking}
    return LLMClient(
        base_url,
        model=config.model,
        api_key=config.api_key,
        connect_timeout_s=config.connect_timeout_s,
        first_token_timeout_s=config.first_token_timeout_s,
        idle_timeout_s=config.idle_timeout_s,
        max_connections=config.max_connections,
        abort_endpoint=config.abort_endpoint,
        **kwargs,
    )


def _check_evidence(
    u: Understanding,
    chosen: str,
    text: str,
    views: Sequence[prompts.CandidateView],
    account_context: Any,
) -> None:
    """A model may break a tie between payees only with evidence: a word of the chosen
    name that the other tied names lack is in the caller's words, or the account context
    names the chosen payee (and not all of the others). It may never choose a payee the
    lookup scored clearly below the best. Small models otherwise pick the first name."""
    scored = [
        (str(c["id"]), float(c.get("score", 0.0)))
        for c in u.entities.get("recipient_candidates") or ()
    ]
    if not scored:
        return  # no lookup scores (an intent question): the enum is the only bound
    best = max(score for _, score in scored)
    tied = [cid for cid, score in scored if best - score < RECIPIENT_MARGIN]
    if chosen not in tied:
        raise InvalidExtraction("weaker_candidate", chosen)
    if len(tied) == 1:
        return
    names = {v.id: fold_name(v.name) for v in views}
    spoken = set(fold_name(text).split())
    others = set().union(*(names.get(cid, "").split() for cid in tied if cid != chosen))
    if (set(names.get(chosen, "").split()) - others) & spoken:
        return
    context = " ".join(prompts.render_context(account_context)).lower()
    mentioned = [
        cid
        for cid in tied
        if cid.lower() in context or (names.get(cid) and names[cid] in fold_name(context))
    ]
    if chosen in mentioned and len(mentioned) < len(tied):
        return
    raise InvalidExtraction("no_evidence", f"{chosen} among {', '.join(tied)}")


def _stats_note(stats: StreamStats) -> str:
    d = stats.to_dict()
    return f"ttft_ms={d['ttft_ms']} total_ms={d['total_ms']} cached_tokens={d['cached_tokens']}"


def _unresolved(u: Understanding, why: str, stats: StreamStats | None = None) -> Understanding:
    """The fast path's understanding, ambiguity intact (the dialogue asks), plus why."""
    note = _stats_note(stats) if stats is not None else ""
    trace = [*u.trace, TraceEntry(note, why, "llm:unresolved")]
    return dataclasses.replace(u, trace=trace)


def _amounts_in(text: str, u: Understanding) -> list[tuple[Decimal, str | None]]:
    """Every amount the deterministic normaliser reads in the words: (value, currency)."""
    clean = " ".join(text.split())
    try:
        found = find_amounts(clean, tokenize(clean))
    except Exception:
        found = []
    out = [(a.value, a.currency) for a in found]
    amount = u.entities.get("amount")
    if isinstance(amount, dict) and amount.get("currency"):
        from agent.understanding.money import EXPONENTS

        exp = EXPONENTS.get(amount["currency"], 2)
        out.append((Decimal(amount["minor"]) / (Decimal(10) ** exp), amount["currency"]))
    return out
