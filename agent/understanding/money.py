"""Money amounts in spoken and written form, as integer minor units with ISO 4217 codes.

"$42.50" -> 4250 USD, "five thousand yen" -> 5000 JPY (JPY has no minor unit), "forty two
fifty" -> 42.50, "fifty quid" -> 5000 GBP, "a grand" -> 1000, "1.5k" -> 1500, "two pounds
fifty" -> 250 GBP, "fifty p" -> 50 GBP. Never floats: values are Decimal until they are
converted to minor units. Pure functions over tokens.tokenize output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from agent.understanding.numbers import (
    NUMBER_WORDS,
    SCALES,
    NumberMatch,
    parse_cardinal,
    parse_price,
)
from agent.understanding.tokens import Token
from agent.understanding.trace import TraceEntry

EXPONENTS = {
    "USD": 2,
    "GBP": 2,
    "EUR": 2,
    "JPY": 0,
    "CAD": 2,
    "AUD": 2,
    "CHF": 2,
    "INR": 2,
    "CNY": 2,
    "KRW": 0,
    "SGD": 2,
    "HKD": 2,
    "NZD": 2,
    "SEK": 2,
    "NOK": 2,
    "DKK": 2,
    "MXN": 2,
}
# The largest amount (in major units) a single voice command may plausibly move.
PLAUSIBLE_MAX = {"JPY": Decimal(1_000_000_000), "KRW": Decimal(10_000_000_000)}
PLAUSIBLE_MAX_DEFAULT = Decimal(10_000_000)

SYMBOLS = {"$": "USD", "£": "GBP", "€": "EUR", "¥": "JPY", "円": "JPY"}
MAJOR_WORDS = {
    "dollar": "USD",
    "dollars": "USD",
    "buck": "USD",
    "bucks": "USD",
    "usd": "USD",
    "pound": "GBP",
    "pounds": "GBP",
    "quid": "GBP",
    "gbp": "GBP",
    "sterling": "GBP",
    "euro": "EUR",
    "euros": "EUR",
    "eur": "EUR",
    "yen": "JPY",
    "jpy": "JPY",
    "cad": "CAD",
    "aud": "AUD",
    "chf": "CHF",
    "francs": "CHF",
    "rupees": "INR",
    "inr": "INR",
    "yuan": "CNY",
    "won": "KRW",
}
CODE_PREFIXES = {"usd", "gbp", "eur", "jpy", "cad", "aud", "chf", "inr"}
MINOR_WORDS = {"cent": "USD", "cents": "USD", "pence": "GBP", "penny": "GBP", "p": "GBP"}
SIGN_WORDS = {"minus", "negative"}
# Words that make a bare number a time, count, date or duration rather than money.
NOT_MONEY_AFTER = {
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
    "hour",
    "hours",
    "minute",
    "minutes",
    "min",
    "mins",
    "second",
    "seconds",
    "time",
    "times",
    "am",
    "pm",
    "a.m",
    "p.m",
    "o'clock",
    "oclock",
    "percent",
    "%",
    "digits",
    "digit",
    "people",
    "person",
    "cards",
    "card",
    "accounts",
    "pin",
    "th",
    "st",
    "nd",
    "rd",
    "morning",
    "afternoon",
    "evening",
    "night",
    "tonight",
}
NOT_MONEY_BEFORE = {
    "at",
    "the",
    "on",
    "past",
    "last",
    "next",
    "every",
    "ending",
    "number",
    "pin",
    "around",
    "by",
    "until",
    "till",
    "since",
    "after",
    "before",
    "within",
    "from",
    "between",
    "and",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "code",
    "digits",
    "extension",
    "age",
    "aged",
}


@dataclass(slots=True)
class AmountMatch:
    value: Decimal
    currency: str | None
    start: int  # char span in the original text
    end: int
    tok_start: int
    tok_end: int
    explicit_currency: bool
    trace: list[TraceEntry] = field(default_factory=list)
    ambiguous: bool = False  # "two fifty": 2.50 or 250?

    def surface(self, text: str) -> str:
        return text[self.start : self.end]


def _currency_before(toks: list[Token], i: int) -> tuple[str, int] | None:
    t = toks[i]
    if t.kind == "sym" and t.text in SYMBOLS:
        return SYMBOLS[t.text], i + 1
    if t.kind == "word" and t.text in CODE_PREFIXES and i + 1 < len(toks):
        if toks[i + 1].kind == "num":
            return MAJOR_WORDS[t.text], i + 1
    return None


def _number_at(toks: list[Token], i: int) -> NumberMatch | None:
    price = parse_price(toks, i)
    if price is not None:
        return price
    return parse_cardinal(toks, i)


def _fraction_after(toks: list[Token], j: int, currency: str) -> tuple[Decimal, int] | None:
    """ "two pounds fifty", "ten dollars and five cents" -> (0.50, end)."""
    if EXPONENTS.get(currency, 2) != 2 or j >= len(toks):
        return None
    k = j + 1 if toks[j].text == "and" else j
    m = parse_cardinal(toks, k)
    if m is None or not m.simple or not 1 <= m.value <= 99 or m.value != int(m.value):
        return None
    end = m.end
    if end < len(toks) and toks[end].text in MINOR_WORDS:
        return m.value / 100, end + 1
    if k != j:  # "and five" needs "cents"/"pence" to follow
        return None
    if end < len(toks) and (toks[end].text in NOT_MONEY_AFTER or toks[end].text in SCALES):
        return None
    return m.value / 100, end


def find_amounts(
    text: str, toks: list[Token], skip: frozenset[int] = frozenset()
) -> list[AmountMatch]:
    """Every money amount in the text, with its currency when one was said."""
    out: list[AmountMatch] = []
    n = len(toks)
    i = 0
    while i < n:
        if i in skip:
            i += 1
            continue
        start_i = i
        sign = 1
        if toks[i].text in SIGN_WORDS or (
            toks[i].text == "-" and i + 1 < n and toks[i + 1].kind in ("num", "sym")
        ):
            sign = -1
            i += 1
            if i >= n:
                break
        currency = None
        explicit = False
        trace: list[TraceEntry] = []
        cur = _currency_before(toks, i)
        num_i = i
        if cur is not None:
            currency, num_i = cur
            explicit = True
        m = _number_at(toks, num_i) if num_i < n else None
        if m is None:
            i = start_i + 1
            continue
        j = m.end
        value = m.value
        rule = m.rule
        if j < n and currency is None:
            t = toks[j]
            if t.kind == "sym" and t.text in SYMBOLS:
                currency, explicit, j = SYMBOLS[t.text], True, j + 1
            elif t.kind == "word" and t.text in MAJOR_WORDS:
                currency, explicit, j = MAJOR_WORDS[t.text], True, j + 1
                # "us dollars", "japanese yen" handled by the word itself; "pounds sterling"
                if j < n and toks[j].text == "sterling":
                    j += 1
                frac = _fraction_after(toks, j, currency)
                if frac is not None and m.value == int(m.value):
                    value += frac[0]
                    j = frac[1]
                    rule += "+minor_part"
            elif t.kind == "word" and t.text in MINOR_WORDS and m.value == int(m.value):
                if t.text != "p" or (m.value < 100 and not _is_pm(toks, j)):
                    currency, explicit = MINOR_WORDS[t.text], True
                    value = m.value / 100
                    rule += "+minor_unit_word"
                    j += 1
        elif (
            currency is not None
            and j < n
            and toks[j].kind == "word"
            and toks[j].text in (MAJOR_WORDS)
        ):
            j += 1  # "$5 dollars"
        if m.rule == "spoken_price" and not explicit:
            # "five thirty" without money words is more often a time than a price.
            prev = toks[start_i - 1].text if start_i > 0 else ""
            if (
                prev in NOT_MONEY_BEFORE
                or (j < n and toks[j].text in NOT_MONEY_AFTER)
                or (_time_after(toks, j))
            ):
                i = start_i + 1
                continue
        if not explicit and not _bare_number_is_money(toks, start_i, j, m):
            i = j
            continue
        value *= sign
        start_c = toks[start_i].start
        end_c = toks[j - 1].end
        surface = text[start_c:end_c]
        trace.append(TraceEntry(surface, str(value), "amount:" + rule))
        if currency is not None:
            trace.append(TraceEntry(surface, currency, "currency:explicit"))
        # "forty two fifty" is 42.50, but "two fifty" may be 2.50 or 250: ask
        ambiguous = m.rule == "spoken_price" and int(m.value) < 10 and rule == m.rule
        out.append(
            AmountMatch(value, currency, start_c, end_c, start_i, j, explicit, trace, ambiguous)
        )
        i = j
    return out


def _is_pm(toks: list[Token], j: int) -> bool:
    """ "3 p.m." / "3 pm": the "p" is a clock, not pence."""
    return j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].text == "m"


def _time_after(toks: list[Token], j: int) -> bool:
    """ "25 to 7", "10 past 9": a clock time, not money."""
    if j + 1 >= len(toks) or toks[j].text not in ("to", "past"):
        return False
    nxt = toks[j + 1]
    return nxt.kind == "num" or nxt.text in NUMBER_WORDS


def _bare_number_is_money(toks: list[Token], start: int, end: int, m: NumberMatch) -> bool:
    prev = toks[start - 1].text if start > 0 else ""
    nxt = toks[end].text if end < len(toks) else ""
    if prev in NOT_MONEY_BEFORE or nxt in NOT_MONEY_AFTER or _time_after(toks, end):
        return False
    if nxt in ("th", "st", "nd", "rd", ":") or (end < len(toks) and toks[end].kind == "num"):
        return False
    if start > 0 and toks[start - 1].kind in ("num", "time"):
        return False
    if m.value == int(m.value) and 1900 <= m.value <= 2100 and m.rule == "digits":
        return False  # a year
    if m.value < 10 and m.value == int(m.value) and m.rule != "spoken_price":
        return False  # "make it 3", "5 new cards": counts, not money
    return True


def to_minor(value: Decimal, currency: str | None) -> tuple[int, bool]:
    """Integer minor units with the currency's exponent; (minor, exact)."""
    exponent = EXPONENTS.get(currency, 2) if currency else 2
    scaled = value * (Decimal(10) ** exponent)
    minor = int(scaled.to_integral_value())
    return minor, minor == scaled


def is_plausible(value: Decimal, currency: str | None) -> bool:
    limit = PLAUSIBLE_MAX.get(currency or "", PLAUSIBLE_MAX_DEFAULT)
    return Decimal(0) < value <= limit
