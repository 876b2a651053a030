"""Normalisation: numbers, money, dates, digit strings, ordinals, with their audit trace."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pytest

from agent.understanding import Understander
from agent.understanding.dates import find_date
from agent.understanding.money import find_amounts, to_minor
from agent.understanding.numbers import parse_cardinal, parse_digit_string, parse_ordinal
from agent.understanding.tokens import tokenize

NOW = datetime(2022, 3, 15, 9, 0)  # a Tuesday, the NLU++ reference time


def amount(text: str) -> tuple[int, str | None] | None:
    found = find_amounts(text, tokenize(text))
    if not found:
        return None
    explicit = [a for a in found if a.explicit_currency]
    a = (explicit or found)[0]
    return to_minor(a.value, a.currency)[0], a.currency


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("two hundred and fifty", 250),
        ("five thousand", 5000),
        ("a hundred", 100),
        ("twelve hundred", 1200),
        ("one million two hundred thousand", 1_200_000),
        ("forty two", 42),
        ("three point five", Decimal("3.5")),
        ("250", 250),
        ("1.5k", 1500),
        ("5,000", 5000),
        ("2 thousand", 2000),
        ("a grand", 1000),
        ("ninety nine", 99),
        ("nineteen", 19),
    ],
)
def test_cardinals(text: str, value: int | Decimal) -> None:
    m = parse_cardinal(tokenize(text), 0)
    assert m is not None
    assert m.value == Decimal(value)
    assert m.end == len(tokenize(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("send $42.50 to ken", (4250, "USD")),
        ("£73", (7300, "GBP")),
        ("5,000円", (5000, "JPY")),
        ("send five thousand yen to ken sato", (5000, "JPY")),
        ("two hundred and fifty dollars", (25000, "USD")),
        ("forty two fifty dollars", (4250, "USD")),
        ("pay forty two fifty to ken", (4250, None)),
        ("fifty quid", (5000, "GBP")),
        ("twenty bucks", (2000, "USD")),
        ("fifty cents", (50, "USD")),
        ("fifty pence", (50, "GBP")),
        ("two pounds fifty", (250, "GBP")),
        ("ten dollars and five cents", (1005, "USD")),
        ("a grand", (100000, None)),
        ("send a grand in euros", (100000, None)),
        ("1.5k pounds", (150000, "GBP")),
        ("€250", (25000, "EUR")),
        ("700£", (70000, "GBP")),
        ("40€", (4000, "EUR")),
        ("84$", (8400, "USD")),
        ("12000 yen", (12000, "JPY")),
        ("¥3000", (3000, "JPY")),
        ("one hundred euros", (10000, "EUR")),
        ("a thousand pounds", (100000, "GBP")),
        ("1 thousand dollars", (100000, "USD")),
        ("did I spend more than 400 in groceries", (40000, None)),
        ("$1,630", (163000, "USD")),
        ("nine ninety nine", (999, None)),
    ],
)
def test_money(text: str, expected: tuple[int, str | None]) -> None:
    assert amount(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "at 10 past 3 p.m. I have an appointment",
        "i cant make it before 15 to 3 p.m.",
        "create 6 new standing orders",
        "I waited 6 days",
        "in 7 days",
        "I started on the 7th of Jan 2018",
        "my card ending one two three four",
        "what's my balance",
    ],
)
def test_not_money(text: str) -> None:
    toks = tokenize(text)
    nlu = Understander.load()
    u = nlu.understand(text, now=NOW)
    assert "amount" not in u.entities, (text, u.entities)
    del toks


def test_jpy_has_no_minor_unit_and_decimals_are_never_floats() -> None:
    assert to_minor(Decimal(5000), "JPY") == (5000, True)
    assert to_minor(Decimal("42.50"), "USD") == (4250, True)
    assert to_minor(Decimal("5.5"), "JPY") == (6, False)
    found = find_amounts("send 42.50 dollars", tokenize("send 42.50 dollars"))
    assert isinstance(found[0].value, Decimal)


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("today", "2022-03-15"),
        ("tomorrow", "2022-03-16"),
        ("the day after tomorrow", "2022-03-17"),
        ("yesterday", "2022-03-14"),
        ("friday", "2022-03-18"),
        ("by Wednesday", "2022-03-16"),
        ("tuesday", "2022-03-22"),
        ("next friday", "2022-03-18"),
        ("last thursday", "2022-03-10"),
        ("in 7 days", "2022-03-22"),
        ("in two weeks", "2022-03-29"),
        ("8 weeks ago", "2022-01-18"),
        ("6 months ago", "2021-09-15"),
        ("on the fifth", "2022-04-05"),
        ("on the 16th", "2022-03-16"),
        ("the twenty first", "2022-03-21"),
        ("22nd of Apr", "2022-04-22"),
        ("July the 20th 1992", "1992-07-20"),
        ("Jan the 19th", "2023-01-19"),
        ("end of the month", "2022-03-31"),
        ("first of next month", "2022-04-01"),
        ("last month", "2022-02-01"),
    ],
)
def test_dates(text: str, iso: str) -> None:
    m = find_date(tokenize(text), NOW.date())
    assert m is not None, text
    assert m.value == date.fromisoformat(iso)


@pytest.mark.parametrize(
    ("text", "digits"),
    [
        ("one two three four", "1234"),
        ("oh five five one", "0551"),
        ("double five oh one", "5501"),
        ("triple seven two", "7772"),
        ("4 4 1 2", "4412"),
        ("1234", "1234"),
    ],
)
def test_digit_strings(text: str, digits: str) -> None:
    assert parse_digit_string(tokenize(text), 0) == (digits, len(tokenize(text)))


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("first", 1),
        ("fifth", 5),
        ("twenty first", 21),
        ("thirty-first", 31),
        ("22nd", 22),
        ("3rd", 3),
    ],
)
def test_ordinals(text: str, n: int) -> None:
    assert parse_ordinal(tokenize(text), 0) == (n, len(tokenize(text)))


def test_account_reference_and_trace() -> None:
    u = Understander.load().understand("lock my card ending one two three four", now=NOW)
    assert u.entities["account_ref"] == "1234"
    rules = {t.rule for t in u.trace}
    assert "account_ref:digits" in rules
    entry = next(t for t in u.trace if t.rule == "account_ref:digits")
    assert entry.surface == "one two three four" and entry.value == "1234"


def test_trace_has_surface_value_rule_for_amount_and_default_currency() -> None:
    nlu = Understander.load()
    u = nlu.understand("send forty two fifty to Ken", now=NOW, default_currency="GBP")
    assert u.entities["amount"] == {"minor": 4250, "currency": "GBP"}
    by_rule = {t.rule: t for t in u.trace}
    assert by_rule["amount:spoken_price"].surface == "forty two fifty"
    assert by_rule["currency:account_default"].value == "GBP"
    u2 = nlu.understand("send forty two fifty to Ken", now=NOW)
    assert u2.entities["amount"]["currency"] is None
    assert any(t.rule == "currency:unspecified" for t in u2.trace)
