"""Payee and biller lookup: romaji variants, ASR mishearings, speed, never an invented id."""

from __future__ import annotations

import random
import statistics
import time

import pytest

from agent.understanding import BillerDirectory, Payee, PayeeIndex
from agent.understanding.phonetic import fold_name, phonetic_key

PAYEES = [
    Payee("p1", "Ken Sato"),
    Payee("p2", "Hiroshi Saito"),
    Payee("p3", "Mary Jones"),
    Payee("p4", "Yuki Ohno"),
    Payee("p5", "Takeshi Itou"),
    Payee("b1", "British Gas", "biller"),
    Payee("b2", "Tokyo Electric Power", "biller"),
]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Sato", "Satoh"),
        ("Sato", "Satou"),
        ("Saito", "Saitou"),
        ("Ohno", "Ono"),
        ("Oono", "Ono"),
        ("Itou", "Ito"),
        ("Shinji", "Sinzi"),
        ("Tsuda", "Tuda"),
    ],
)
def test_romaji_variants_fold_together(a: str, b: str) -> None:
    assert fold_name(a) == fold_name(b)


@pytest.mark.parametrize(
    ("query", "want"),
    [
        ("ken sato", "p1"),
        ("Ken Satoh", "p1"),
        ("ken satou", "p1"),
        ("hiroshi saitou", "p2"),
        ("hiroshi saito", "p2"),
        ("yuki ono", "p4"),
        ("takeshi ito", "p5"),
        # ASR-style mishearings
        ("ken sat oh", "p1"),
        ("can sato", "p1"),
        ("hero she saito", "p2"),
        ("marry jones", "p3"),
        ("mary joans", "p3"),
        ("british gaz", "b1"),
        ("tokio electrick power", "b2"),
    ],
)
def test_lookup_finds_the_right_payee(query: str, want: str) -> None:
    res = PayeeIndex(PAYEES).search(query, k=3)
    assert res, query
    assert res[0].id == want, (query, res)
    assert res[0].score >= 0.75


def test_sato_and_saito_are_told_apart() -> None:
    index = PayeeIndex([Payee("a", "Ken Sato"), Payee("b", "Ken Saito")])
    for q, want in [("ken sato", "a"), ("ken satoh", "a"), ("ken saito", "b"), ("ken saitou", "b")]:
        res = index.search(q)
        assert res[0].id == want
        assert res[0].score - res[1].score >= 0.05


def test_never_invents_an_id_and_no_match_for_nonsense() -> None:
    index = PayeeIndex(PAYEES)
    ids = {p.id for p in PAYEES}
    for q in ["ken", "zzzz qqqq", "", "佐藤", "the", "x" * 500]:
        for c in index.search(q):
            assert c.id in ids
    assert index.search("zzzz qqqq") == []
    assert PayeeIndex([]).search("ken sato") == []


def test_phonetic_key_merges_spelling_variants() -> None:
    assert phonetic_key(fold_name("Catherine")) == phonetic_key(fold_name("Kathryn"))
    assert phonetic_key(fold_name("Philip")) == phonetic_key(fold_name("Filip"))
    assert phonetic_key(fold_name("Ryo")) == phonetic_key(fold_name("Lyo"))
    assert phonetic_key(fold_name("Sato")) != phonetic_key(fold_name("Tanaka"))


def _names(n: int, seed: int) -> list[Payee]:
    rng = random.Random(seed)
    syll = [
        "ka",
        "ki",
        "ko",
        "sa",
        "shi",
        "to",
        "na",
        "mi",
        "ra",
        "yu",
        "ta",
        "ro",
        "ha",
        "jo",
        "an",
        "el",
        "mar",
        "son",
        "ber",
        "li",
        "da",
        "vi",
        "en",
        "ne",
    ]

    def word() -> str:
        return "".join(rng.choice(syll) for _ in range(rng.randint(2, 3))).capitalize()

    return [Payee(f"id{i}", f"{word()} {word()}") for i in range(n)]


def test_thousand_payees_lookup_under_one_millisecond() -> None:
    # CPU time of this thread: the machine is shared, and waiting for a core is not ours.
    payees = [*_names(995, 1), *PAYEES[:5]]
    t = time.thread_time()
    index = PayeeIndex(payees)
    build_ms = (time.thread_time() - t) * 1000
    times = []
    for q in ["ken satoh", "hiroshi saitou", "mary joans", "can sato", "yuki ono"] * 20:
        t = time.thread_time()
        res = index.search(q, k=3)
        times.append((time.thread_time() - t) * 1000)
        assert res[0].id.startswith("p")
    assert statistics.median(times) < 1.0, statistics.median(times)
    assert build_ms < 200


def test_hundred_thousand_biller_directory() -> None:
    entries = [Payee(p.id, p.name, "biller") for p in _names(100_000, 2)]
    entries[777] = Payee("tepco", "Tokyo Electric Power", "biller")
    entries[888] = Payee("bgas", "British Gas", "biller")
    t = time.thread_time()
    directory = BillerDirectory(entries)
    build_s = time.thread_time() - t
    assert build_s < 15
    times = []
    for q, want in [
        ("tokyo electric power", "tepco"),
        ("tokio electrick power", "tepco"),
        ("british gas", "bgas"),
        ("brittish gaz", "bgas"),
    ] * 5:
        t = time.thread_time()
        res = directory.search(q, k=3)
        times.append((time.thread_time() - t) * 1000)
        assert res and res[0].id == want, (q, res)
    assert statistics.median(times) < 20
