"""The fast intent path: held-out accuracy, slots and ambiguity, bad input, end of turn."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from agent.understanding import (
    ACTION_INTENTS,
    Payee,
    Understander,
    Understanding,
    turn_completeness,
)

NOW = datetime(2022, 3, 15, 9, 0)
FIXTURE = Path(__file__).parent / "fixtures" / "understanding_dev_sample.jsonl"
PAYEES = [
    Payee("p1", "Ken Sato"),
    Payee("p2", "Hiroshi Saito"),
    Payee("p3", "Mary Jones"),
    Payee("b1", "British Gas", "biller"),
]


@pytest.fixture(scope="module")
def nlu() -> Understander:
    return Understander.load()


@pytest.fixture(scope="module")
def dev_results(nlu: Understander) -> list[tuple[dict, Understanding]]:
    """Held-out rows (CLINC150 val, BANKING77 slice never trained on) and their results."""
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    return [(r, nlu.understand(r["text"], now=NOW)) for r in rows]


def _rate(pairs, keep, ok) -> float:
    sel = [(r, u) for r, u in pairs if keep(r)]
    assert sel
    return sum(ok(r, u) for r, u in sel) / len(sel)


def test_command_intents_on_held_out_clinc(dev_results) -> None:
    acc = _rate(dev_results, lambda r: r["set"] == "command", lambda r, u: u.intent == r["intent"])
    assert acc >= 0.93, acc


def test_non_banking_is_never_an_action(dev_results) -> None:
    rate = _rate(
        dev_results, lambda r: r["set"] == "non_banking", lambda r, u: u.intent in ACTION_INTENTS
    )
    assert rate <= 0.01, rate


def test_faq_topics_on_held_out_banking77(dev_results) -> None:
    acc = _rate(
        dev_results,
        lambda r: r["set"] == "faq",
        lambda r, u: u.intent == "faq" and u.topic == r["topic"],
    )
    assert acc >= 0.85, acc


def test_yes_no_cancel(dev_results, nlu: Understander) -> None:
    acc = _rate(dev_results, lambda r: r["set"] == "yes_no", lambda r, u: u.intent == r["intent"])
    assert acc >= 0.8, acc
    for text in ["yes", "yeah go ahead", "yep that's right", "correct", "sure", "ok thanks"]:
        assert nlu.understand(text).intent == "confirm", text
    for text in [
        "no",
        "nope",
        "cancel",
        "cancel that",
        "never mind",
        "no stop",
        "no, leave them be for now",
        "stop",
    ]:
        assert nlu.understand(text).intent == "deny", text
    # statements of agreement or disagreement, and questions that only sound like them
    for text in ["this is a true statement", "you are not wrong about that"]:
        assert nlu.understand(text).intent == "confirm", text
    for text in ["that is not correct", "i said cancel", "no, that is fake"]:
        assert nlu.understand(text).intent == "deny", text
    for text in ["My payment had a wrong exchange rate.", "I found a transfer fee - is that ok?"]:
        assert nlu.understand(text).intent not in ("confirm", "deny"), text


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("what's my balance", "check_balance"),
        ("how much money do i have in savings", "check_balance"),
        ("show me my recent transactions", "recent_transactions"),
        ("send fifty pounds to ken sato", "transfer_money"),
        ("pay my british gas bill", "pay_bill"),
        ("lock my card", "lock_card"),
        ("i lost my debit card please freeze it", "lock_card"),
        ("unlock my card", "unlock_card"),
        ("let me talk to a real person", "human_handoff"),
        ("what's the weather like in tokyo", "out_of_scope"),
        ("how long does a transfer to another country take", "faq"),
        ("how late is the Shibuya branch open on Saturday", "faq"),
        ("send five thousand yen to Ken Sato", "transfer_money"),
    ],
)
def test_spoken_commands(nlu: Understander, text: str, intent: str) -> None:
    assert nlu.understand(text, payees=PAYEES, now=NOW).intent == intent


def test_complete_transfer_is_confident_and_needs_confirmation(nlu: Understander) -> None:
    u = nlu.understand("send fifty pounds to Ken Satoh tomorrow", payees=PAYEES, now=NOW)
    assert u.intent == "transfer_money"
    assert u.ambiguity_reason is None
    assert u.needs_confirmation
    assert u.confidence >= 0.8
    assert u.entities["amount"] == {"minor": 5000, "currency": "GBP"}
    assert u.entities["date"] == "2022-03-16"
    assert u.entities["recipient_candidates"][0]["id"] == "p1"
    d = u.to_dict()
    assert set(d) == {
        "intent",
        "confidence",
        "topic",
        "entities",
        "needs_confirmation",
        "ambiguity_reason",
        "path",
        "trace",
    }
    assert d["path"] == "fast"
    assert all(set(t) == {"surface", "value", "rule"} for t in d["trace"])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("send fifty pounds", "missing_recipient"),
        ("send money to ken sato", "missing_amount"),
        ("send fifty pounds to ken", "ambiguous_recipient"),
        ("send fifty pounds to zebedee quux", "unknown_recipient"),
        ("send fifty dollars to ken sato no wait sixty dollars", "conflicting_amounts"),
        ("send two fifty to ken sato", "ambiguous_amount"),
    ],
)
def test_ambiguity_reasons(nlu: Understander, text: str, reason: str) -> None:
    payees = [*PAYEES, Payee("p9", "Ken Tanaka")]
    u = nlu.understand(text, payees=payees, now=NOW)
    assert u.intent == "transfer_money", u
    assert u.ambiguity_reason == reason, u
    assert u.confidence <= 0.5


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty_input"),
        ("   ", "empty_input"),
        ("um uh er", "no_content"),
        ("send fifty pounds to ken sato " * 400, "input_too_long"),
        ("送金 5000円 佐藤さんへ", "unsupported_script"),
        ("send minus five dollars to ken sato", "negative_amount"),
        ("send a trillion yen to ken sato", "implausible_amount"),
        ("send zero dollars to ken sato", "zero_amount"),
    ],
)
def test_bad_input_gives_a_reason_never_a_confident_action(
    nlu: Understander, text: str, reason: str
) -> None:
    u = nlu.understand(text, payees=PAYEES, now=NOW)
    assert u.ambiguity_reason == reason, u
    if u.intent in ACTION_INTENTS:
        assert u.confidence <= 0.5


@pytest.mark.parametrize(
    "text",
    [
        "😀😀😀",
        "send 💷 fifty pounds 🙏 to ken sato",
        "\x00\x01",
        "ｓｅｎｄ　５０ ｐｏｕｎｄｓ",
        "Ken Sato さんに 5000円 送って",
        "🏦" * 3000,
        "-" * 50,
        "$$$",
        "£",
        "0.0.0.0",
    ],
)
def test_odd_input_never_raises(nlu: Understander, text: str) -> None:
    u = nlu.understand(text, payees=PAYEES, now=NOW)
    assert isinstance(u, Understanding)
    json.dumps(u.to_dict())
    if u.intent in ACTION_INTENTS and u.ambiguity_reason:
        assert u.confidence <= 0.5


def test_non_string_input_is_handled(nlu: Understander) -> None:
    assert nlu.understand(None).ambiguity_reason == "empty_input"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("what's my balance", "complete"),
        ("send fifty pounds to Ken Sato", "complete"),
        ("yes", "complete"),
        ("send two hundred pounds to", "incomplete"),
        ("pay my", "incomplete"),
        ("transfer fifty pounds to ken sato from my", "incomplete"),
        ("um", "incomplete"),
        ("send fifty pounds", "incomplete"),
        ("", "unknown"),
        ("I was wondering about", "incomplete"),
    ],
)
def test_turn_completeness(text: str, want: str) -> None:
    assert turn_completeness(text, payees=PAYEES) == want


def test_latency_p99_under_5ms(nlu: Understander, dev_results) -> None:
    texts = [r["text"] for r, _ in dev_results][:600]
    for t in texts[:50]:
        nlu.understand(t, payees=PAYEES, now=NOW)
    times = []
    for t in texts:
        # best of three: the machine is shared, a descheduled thread is not our latency
        best = float("inf")
        for _ in range(3):
            t0 = time.thread_time()
            nlu.understand(t, payees=PAYEES, now=NOW)
            best = min(best, (time.thread_time() - t0) * 1000)
        times.append(best)
    times.sort()
    assert times[int(0.99 * (len(times) - 1))] < 5.0, times[-10:]


def test_load_is_cached_and_fast() -> None:
    t = time.thread_time()
    a = Understander.load()
    b = Understander.load()
    assert a is b
    assert time.thread_time() - t < 2.0


def test_verb_amount_recipient_is_a_transfer_or_a_bill(nlu: Understander) -> None:
    payees = [
        Payee("p1", "Ken Sato"),
        Payee("p2", "Ken Saito"),
        Payee("b1", "British Gas", "biller"),
    ]
    u = nlu.understand("send forty two fifty to ken satoh on the fifth", payees=payees, now=NOW)
    assert u.intent == "transfer_money" and u.ambiguity_reason is None
    assert u.entities["amount"]["minor"] == 4250 and u.entities["date"] == "2022-04-05"
    assert u.entities["recipient_candidates"][0] == {"id": "p1", "score": 1.0}
    u = nlu.understand("please pay british gas fifty pounds", payees=payees, now=NOW)
    assert u.intent == "pay_bill"
    assert u.entities["recipient_candidates"][0]["id"] == "b1"
    u = nlu.understand("can you transfer 200 dollars to my savings", payees=payees, now=NOW)
    assert u.intent == "transfer_money" and u.ambiguity_reason is None
    assert nlu.understand("how do i send 50 dollars to ken?", payees=payees).intent == "faq"


def test_bare_name_reply_is_looked_up(nlu: Understander) -> None:
    payees = [Payee("p1", "Ken Sato"), Payee("p2", "Hiroshi Saito")]
    u = nlu.understand("Satoh", payees=payees, now=NOW)
    assert u.entities["recipient_candidates"][0]["id"] == "p1"
    assert u.intent not in ACTION_INTENTS


def test_an_unknown_name_alone_is_never_a_yes_or_a_no(nlu: Understander) -> None:
    # character n-grams once made "yusuf" a confident confirm and "nobu" a deny
    for text in ["yusuf", "nobu", "noah", "yuki", "yukiko tanaka", "nora"]:
        u = nlu.understand(text)
        assert u.intent not in ("confirm", "deny"), (text, u.intent)
        assert u.confidence <= 0.5
    for text in ["yes", "yep", "no", "nope"]:
        assert nlu.understand(text).intent in ("confirm", "deny")


def test_polite_refusals_and_one_slip_yes_no_words(nlu: Understander) -> None:
    for text in ["i'd rather not", "i would prefer not to", "not really", "i don't think so"]:
        assert nlu.understand(text).intent == "deny", text
    for text in ["that's what i said", "sure thing", "affirmitive", "definately", "absolutly"]:
        assert nlu.understand(text).intent == "confirm", text
    assert nlu.understand("negitive").intent == "deny"
    # long names and words that are not one slip from a yes/no word stay out of it
    for text in ["alexandra", "christopher", "affirmation", "certificate", "navigate"]:
        assert nlu.understand(text).intent not in ("confirm", "deny"), text
