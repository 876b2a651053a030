"""Numbers in spoken and written form: cardinals, decimals, ordinals and digit strings.

Pure functions over the token list from tokens.tokenize. Each parser takes the tokens and
a start index and returns a match (value, end index exclusive, rule name) or None, so the
callers (money, dates, references) can compose them and quote the surface text.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from agent.understanding.tokens import Token

UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
}
TEENS = {
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fourty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
SCALES = {
    "thousand": 1000,
    "k": 1000,
    "grand": 1000,
    "million": 10**6,
    "m": 10**6,
    "mil": 10**6,
    "billion": 10**9,
    "bn": 10**9,
    "trillion": 10**12,
}
ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
    "thirteenth": 13,
    "fourteenth": 14,
    "fifteenth": 15,
    "sixteenth": 16,
    "seventeenth": 17,
    "eighteenth": 18,
    "nineteenth": 19,
    "twentieth": 20,
    "thirtieth": 30,
}
DIGIT_WORDS = {**UNITS, "oh": 0, "o": 0, "nought": 0, "naught": 0}
NUMBER_WORDS = frozenset(UNITS) | frozenset(TEENS) | frozenset(TENS)


@dataclass(frozen=True, slots=True)
class NumberMatch:
    value: Decimal
    start: int  # token index
    end: int  # token index, exclusive
    rule: str
    simple: bool = True  # no hundred/scale word: "forty two" (can pair into a price)


def _dec(text: str) -> Decimal | None:
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def parse_cardinal(toks: list[Token], i: int) -> NumberMatch | None:
    """Cardinal at toks[i]: "250", "1.5k", "two hundred and fifty", "a grand", "5 thousand"."""
    n = len(toks)
    if i >= n:
        return None
    tok = toks[i]
    if tok.kind == "num":
        value = _dec(tok.text)
        if value is None:
            return None
        j = i + 1
        rule = "digits"
        simple = True
        if j < n and toks[j].kind == "word" and toks[j].text in SCALES:
            value *= SCALES[toks[j].text]
            rule = "digits_with_scale"
            simple = False
            j += 1
        return NumberMatch(value, i, j, rule, simple)
    if tok.kind != "word":
        return None
    total = 0
    seg = 0
    last: str | None = None
    simple = True
    j = i
    if tok.text in ("a", "an") and i + 1 < n and toks[i + 1].text in ("hundred", *SCALES):
        seg = 1
        last = "unit"
        j = i + 1
    while j < n:
        t = toks[j]
        if t.kind != "word":
            break
        w = t.text
        if w in UNITS:
            if last in ("unit", "teen") or (last != "ten" and seg % 100 != 0):
                break
            seg += UNITS[w]
            last = "unit"
        elif w in TEENS:
            if last in ("unit", "teen", "ten") or seg % 100 != 0:
                break
            seg += TEENS[w]
            last = "teen"
        elif w in TENS:
            if last in ("unit", "teen", "ten") or seg % 100 != 0:
                break
            seg += TENS[w]
            last = "ten"
        elif w == "hundred":
            if last not in ("unit", "teen", "ten") or seg >= 100:
                break
            seg *= 100
            last = "hundred"
            simple = False
        elif w in SCALES and w not in ("k", "m", "bn"):
            if last not in ("unit", "teen", "ten", "hundred"):
                break
            total += seg * SCALES[w]
            seg = 0
            last = "scale"
            simple = False
        elif w == "and" and last in ("hundred", "scale"):
            if j + 1 < n and toks[j + 1].text in NUMBER_WORDS:
                j += 1
                continue
            break
        else:
            break
        j += 1
    if last is None:
        return None
    value = Decimal(total + seg)
    # "three point five", "one point two five"
    if j + 1 < n and toks[j].text == "point" and toks[j + 1].text in DIGIT_WORDS:
        k = j + 1
        digits = ""
        while k < n and toks[k].kind == "word" and toks[k].text in DIGIT_WORDS:
            digits += str(DIGIT_WORDS[toks[k].text])
            k += 1
        return NumberMatch(value + Decimal("0." + digits), i, k, "spoken_decimal", False)
    return NumberMatch(value, i, j, "cardinal_words", simple)


def parse_price(toks: list[Token], i: int) -> NumberMatch | None:
    """Two simple groups said as a price: "forty two fifty" -> 42.50, "nine ninety nine"."""
    first = parse_cardinal(toks, i)
    if first is None or first.rule != "cardinal_words" or not first.simple:
        return None
    if first.value >= 100:
        return None
    j = first.end
    if j < len(toks) and toks[j].text in ("oh", "o") and j + 1 < len(toks):
        nxt = toks[j + 1].text
        if nxt in UNITS and nxt != "zero":
            end = j + 2
            return NumberMatch(first.value + Decimal(UNITS[nxt]) / 100, i, end, "spoken_price")
    second = parse_cardinal(toks, j)
    if second is None or second.rule != "cardinal_words" or not second.simple:
        return None
    if not 10 <= second.value <= 99:
        return None
    return NumberMatch(first.value + second.value / 100, i, second.end, "spoken_price")


def parse_ordinal(toks: list[Token], i: int) -> tuple[int, int] | None:
    """Ordinal at toks[i]: "5th", "fifth", "twenty first", "thirty-first" -> (n, end)."""
    if i >= len(toks):
        return None
    tok = toks[i]
    if tok.kind == "ord":
        try:
            return int(tok.text), i + 1
        except ValueError:
            return None
    if tok.kind != "word":
        return None
    if tok.text in ORDINALS:
        return ORDINALS[tok.text], i + 1
    if tok.text in TENS and i + 1 < len(toks) and toks[i + 1].text in ORDINALS:
        unit = ORDINALS[toks[i + 1].text]
        if unit < 10:
            return TENS[tok.text] + unit, i + 2
    return None


def parse_digit_string(toks: list[Token], i: int) -> tuple[str, int] | None:
    """Digits said one by one: "one two three four", "oh", "double five", or "1234"."""
    n = len(toks)
    digits = ""
    j = i
    while j < n:
        t = toks[j]
        if t.kind == "num" and "." not in t.text:
            digits += t.text
            j += 1
        elif t.kind == "word" and t.text in DIGIT_WORDS:
            digits += str(DIGIT_WORDS[t.text])
            j += 1
        elif t.kind == "word" and t.text in ("double", "triple") and j + 1 < n:
            nxt = toks[j + 1]
            if nxt.kind == "word" and nxt.text in DIGIT_WORDS:
                digits += str(DIGIT_WORDS[nxt.text]) * (2 if t.text == "double" else 3)
                j += 2
            else:
                break
        else:
            break
    if not digits:
        return None
    return digits, j
