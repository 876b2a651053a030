"""FAQ retrieval: the right passage for real questions, confident only when it answers."""

from __future__ import annotations

import time

import pytest

from agent.qna import FAQIndex, spoken_answer
from agent.qna.index import stem, terms


@pytest.fixture(scope="module")
def index() -> FAQIndex:
    return FAQIndex.load()


@pytest.mark.parametrize(
    ("question", "passage"),
    [
        ("how late is the shibuya branch open on saturday", "branch-shibuya-hours"),
        ("when does the shinjuku branch close", "branch-shinjuku-hours"),
        ("what's the fee for sending money abroad", "fee-international-transfer"),
        ("my card is broken, how do I get a new one", "card-replacement"),
        ("how long will my new card take to arrive", "card-arrival"),
        ("what interest does the savings account pay", "interest-savings"),
    ],
)
def test_own_answers_found_and_confident(index: FAQIndex, question: str, passage: str) -> None:
    hits = index.search(question, k=3)
    assert hits[0].passage.id == passage
    assert hits[0].confidence >= 0.6


def test_upstream_ibm_pairs_are_searchable(index: FAQIndex) -> None:
    hits = index.search("is there a limit on mobile check deposit")
    assert "mobile check deposit" in hits[0].question.lower()
    assert hits[0].passage.source == "ibm_banking_faq.jsonl"


def test_unrelated_questions_find_nothing_confident(index: FAQIndex) -> None:
    assert index.search("what is the capital of france") == []
    hits = index.search("do you have a branch in osaka")
    assert not hits or hits[0].confidence < 0.6


def test_topic_label_boosts_its_passage(index: FAQIndex) -> None:
    plain = index.search("it stopped working", k=5)
    boosted = index.search("it stopped working", k=5, topic="card_not_working")
    assert boosted and boosted[0].passage.id == "card-replacement"
    assert not plain or plain[0].confidence <= boosted[0].confidence


def test_search_is_fast(index: FAQIndex) -> None:
    start = time.perf_counter()
    for _ in range(200):
        index.search("how late is the shibuya branch open on saturday")
    assert (time.perf_counter() - start) / 200 < 0.005


def test_text_helpers() -> None:
    assert stem("hours") == "hour" and stem("opening") == "open" and stem("charges") == "charge"
    assert terms("What are the fees?") == ["fee"]
    repeated = "One thing. Two things. Two things. Three. Four."
    assert spoken_answer(repeated) == "One thing. Two things. Three."
