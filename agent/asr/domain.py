"""The banking domain language for the embedded pocketsphinx decoder.

Why a domain model: pocketsphinx's general English model has 25-30% WER on banking
commands, while an n-gram model trained on the command phrases (plus the caller's own
payee names) gets the in-domain commands nearly right, and it is cheap enough to build
per call. This module is pure (no decoder, no I/O besides reading cmudict once): it
produces the corpus, the ARPA text and the pronunciations; :mod:`agent.asr.embedded`
turns them into a decoder.

Names the dictionary lacks (``Yuki``, ``Shibuya``, ``Priya``) get a pronunciation from
:func:`guess_pronunciation`: Hepburn romaji is spelled phonemically, so Japanese names
map rule by rule; anything else falls back to simple English letter-to-sound rules.
"""

from __future__ import annotations

import functools
import io
import itertools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pocketsphinx import get_model_path
from pocketsphinx.lm import ArpaBoLM

CMUDICT_PATH = Path(get_model_path()) / "en-us" / "cmudict-en-us.dict"

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int, *, use_and: bool = False) -> str:
    """Spell a non-negative integer the way a caller says it ("two hundred fifty")."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, rest = divmod(n, 10)
        return _TENS[tens] + (f" {_ONES[rest]}" if rest else "")
    for size, word in (
        (10**9, "billion"),
        (10**6, "million"),
        (1000, "thousand"),
        (100, "hundred"),
    ):
        if n >= size:
            head, rest = divmod(n, size)
            out = f"{number_words(head, use_and=use_and)} {word}"
            if rest:
                joiner = " and " if use_and and rest < 100 else " "
                out += joiner + number_words(rest, use_and=use_and)
            return out
    raise AssertionError(n)


_AMOUNT_VALUES = (
    1, 2, 3, 5, 7, 10, 12, 15, 20, 25, 30, 40, 45, 50, 60, 75, 80, 99, 100, 120, 150, 200,
    250, 300, 400, 500, 600, 750, 800, 1000, 1200, 1500, 2000, 2500, 3000, 4000, 5000,
    6000, 8000, 10000, 15000, 20000, 30000, 50000, 100000, 200000, 500000,
)  # fmt: skip
_CURRENCIES = ("dollars", "yen", "euros", "pounds")
_DAYS = (
    *"monday tuesday wednesday thursday friday saturday sunday today tomorrow".split(),
    *("next week", "next monday", "the first", "the fifteenth", "the end of the month"),
)
_BILLERS = (
    "electricity", "water", "gas", "phone", "mobile phone", "internet", "credit card",
    "cable", "rent", "insurance", "utility",
)  # fmt: skip
_BRANCHES = (
    "shibuya", "shinjuku", "ginza", "ikebukuro", "ueno", "shinagawa", "roppongi", "tokyo",
    "osaka", "yokohama", "main", "downtown", "airport", "city",
)  # fmt: skip
# Generic payees so "to <name>" has context before the caller's own names are added.
_BASE_PAYEES = (
    "mary johnson", "david lee", "michael brown", "sarah wilson", "james taylor",
    "emily davis", "my mom", "my mother", "my dad", "my father", "my wife", "my husband",
    "my son", "my daughter", "my landlord", "my brother", "my sister",
)  # fmt: skip
_ACCOUNTS = ("checking", "savings", "current", "joint")
_CARDS = ("card", "debit card", "credit card", "bank card", "visa card")


def amount_phrases() -> list[str]:
    """Spoken amounts: "five thousand yen", "two hundred and fifty dollars", ..."""
    out = []
    for value, cur in itertools.product(_AMOUNT_VALUES, _CURRENCIES):
        out.append(f"{number_words(value)} {cur}")
        with_and = number_words(value, use_and=True)
        if with_and != out[-1].rsplit(" ", 1)[0]:
            out.append(f"{with_and} {cur}")
    out += ["a hundred dollars", "a thousand yen", "fifty dollars and fifty cents"]
    out += ["ten dollars and twenty five cents", "one dollar", "one euro", "one pound"]
    return out


_COMMAND_SENTENCES = """
what's my balance
what is my balance
what's my account balance
what's my {account} balance
what's the balance on my {account} account
how much money do i have
how much money do i have in my {account} account
how much is in my {account} account
check my balance
check my {account} balance
tell me my balance
balance please
my balance
show me my recent transactions
what are my recent transactions
show me my transactions
what did i spend last week
what did i spend yesterday
what did i spend this month
what did i spend on {day}
list my last five transactions
show my transaction history
what was my last payment
read me my recent purchases
did my salary come in
send {amount} to {payee}
transfer {amount} to {payee}
pay {payee} {amount}
send {payee} {amount}
transfer {amount} to {payee} {day}
send {amount} to {payee} on {day}
wire {amount} to {payee}
i want to send {amount} to {payee}
i'd like to transfer {amount} to {payee}
can you send {amount} to {payee}
please send {amount} to {payee}
send money to {payee}
send the money to {payee}
transfer money to {payee}
pay {payee}
i want to transfer
i want to send money
i want to transfer money
make a transfer
transfer {amount} from my {account} account to my {account} account
move {amount} to my {account} account
pay my {biller} bill
pay the {biller} bill
pay the {biller} bill on {day}
pay my {biller} bill {day}
i want to pay a bill
i want to pay my {biller} bill
pay a bill
lock my {card}
please lock my {card}
i lost my {card}
i lost my {card} please lock it
my {card} was stolen
freeze my {card}
block my {card}
unlock my {card}
please unlock my {card}
unfreeze my {card}
i found my {card} please unlock it
i want to speak to a person
i want to talk to a person
let me talk to a human
can i talk to someone
can i speak to someone
connect me to an agent
i want to speak to a representative
i need to talk to a real person
agent
operator
representative
human please
yes
yes please
yeah
yep
correct
that's correct
that's right
yes that's right
sure
go ahead
confirm
okay
ok
do it
no
no thanks
no thank you
nope
cancel
cancel that
cancel the transfer
stop
never mind
don't do that
no that's wrong
that's not right
what time does the branch open on {day}
what time does the {branch} branch open
what time does the branch close on {day}
how late is the {branch} branch open on {day}
how late is the branch open {day}
when does the branch close
is the {branch} branch open on {day}
what are your opening hours
what are the opening hours of the {branch} branch
where is the nearest atm
where is the nearest branch
what is the fee for an international transfer
what is the fee for a transfer
what is the interest rate on my savings account
what is the interest rate
how do i change my pin
how do i reset my password
what's the exchange rate for dollars to yen
how long does a transfer take
what is the daily transfer limit
how do i open an account
hello
hi
thank you
thanks
goodbye
that's all
"""

_SLOTS: dict[str, Sequence[str]] = {
    "account": _ACCOUNTS,
    "day": _DAYS,
    "biller": _BILLERS,
    "branch": _BRANCHES,
    "card": _CARDS,
}
_WORD_RE = re.compile(r"[a-z]+(?:'[a-z]+)?")


def normalize_phrase(text: str) -> str:
    """Lowercase, keep letters and inner apostrophes: the LM/dictionary token form."""
    return " ".join(_WORD_RE.findall(text.lower().replace("’", "'")))


def _expand(template: str, payees: Sequence[str], amounts: Sequence[str]) -> Iterable[str]:
    """Expand each slot over its values, one slot at a time (not the full product).

    Cycling keeps the corpus small (a few thousand lines) while every value of every
    slot appears in every template's context, which is what the trigram counts need.
    """
    slots = re.findall(r"{(\w+)}", template)
    if not slots:
        yield template
        return
    values = {
        s: (payees if s == "payee" else amounts if s == "amount" else _SLOTS[s]) for s in slots
    }
    longest = max(len(v) for v in values.values())
    for i in range(longest):
        filled = template
        for s in slots:
            filled = filled.replace("{" + s + "}", values[s][i % len(values[s])], 1)
        yield filled


def base_corpus() -> list[str]:
    """The command corpus without any caller-specific names."""
    amounts = amount_phrases()
    sentences: list[str] = []
    for template in _COMMAND_SENTENCES.strip().splitlines():
        sentences.extend(_expand(template.strip(), _BASE_PAYEES, amounts))
    sentences.extend(amounts)  # an amount alone, e.g. answering "how much?"
    sentences.extend(_BASE_PAYEES)
    return sentences


_PAYEE_TEMPLATES = (
    "send {amount} to {payee}",
    "transfer {amount} to {payee}",
    "pay {payee} {amount}",
    "send the money to {payee}",
    "send money to {payee}",
    "transfer money to {payee}",
    "pay {payee}",
    "{payee}",
)


def payee_corpus(phrases: Sequence[str], repeat: int = 3) -> list[str]:
    """Sentences that put the caller's payees (and their first names) in context.

    ``repeat`` weights them above the generic base payees: the caller is far more
    likely to name one of their own payees.
    """
    names: list[str] = []
    for p in phrases:
        norm = normalize_phrase(p)
        if norm and norm not in names:
            names.append(norm)
        first = norm.split(" ", 1)[0] if norm else ""
        if first and first not in names and first != norm:
            names.append(first)
    if not names:
        return []
    amounts = amount_phrases()[::7]
    out: list[str] = []
    for template in _PAYEE_TEMPLATES:
        out.extend(_expand(template, names, amounts))
    return out * repeat


def build_arpa(sentences: Iterable[str]) -> str:
    """Train a trigram LM (Katz-style backoff, fixed discount) and return ARPA text."""
    lm = ArpaBoLM(add_start=True, discount_mass=0.5)
    lm.read_corpus(io.StringIO("\n".join(sentences)))
    lm.compute()
    out = io.StringIO()
    lm.write(out)
    return out.getvalue()


@functools.cache
def cmudict() -> dict[str, tuple[str, ...]]:
    """word -> pronunciations, from the dictionary that ships with pocketsphinx.

    Read once per process (~0.3 s, ~20 MB) so per-call name lookups are dict hits.
    """
    out: dict[str, tuple[str, ...]] = {}
    with CMUDICT_PATH.open(encoding="utf-8") as f:
        for line in f:
            word, _, phones = line.strip().partition(" ")
            base = word.split("(", 1)[0]
            out[base] = (*out.get(base, ()), phones.strip())
    return out


def vocabulary(sentences: Iterable[str]) -> set[str]:
    return {w for s in sentences for w in s.split()}


def pronunciations(words: Iterable[str]) -> dict[str, list[str]]:
    """All dictionary pronunciations (variants included) for ``words``, guessing OOVs."""
    cmu = cmudict()
    return {w: list(cmu.get(w, ())) or [guess_pronunciation(w)] for w in set(words)}


# --- letter-to-sound for names missing from cmudict ---------------------------------

_ROMAJI_VOWELS = {"a": "AA", "i": "IY", "u": "UW", "e": "EH", "o": "OW"}
_ROMAJI_ONSETS = {
    "ky": "K Y", "gy": "G Y", "sh": "SH", "ch": "CH", "ts": "T S", "ny": "N Y", "hy": "HH Y",
    "my": "M Y", "ry": "R Y", "by": "B Y", "py": "P Y", "j": "JH", "k": "K", "g": "G",
    "s": "S", "z": "Z", "t": "T", "d": "D", "n": "N", "h": "HH", "f": "F", "m": "M",
    "y": "Y", "r": "R", "w": "W", "b": "B", "p": "P", "": "",
}  # fmt: skip


def _romaji(word: str) -> str | None:
    """Hepburn romaji -> ARPABET, or None if ``word`` is not plain romaji."""
    phones: list[str] = []
    i = 0
    while i < len(word):
        # geminate consonant (sapporo, hokkaido): one closure is close enough
        if i + 1 < len(word) and word[i] == word[i + 1] and word[i] not in "aeioun":
            i += 1
            continue
        for onset in sorted(_ROMAJI_ONSETS, key=len, reverse=True):
            if word.startswith(onset, i) and i + len(onset) < len(word):
                v = word[i + len(onset)]
                if v in _ROMAJI_VOWELS:
                    if _ROMAJI_ONSETS[onset]:
                        phones.append(_ROMAJI_ONSETS[onset])
                    vowel = _ROMAJI_VOWELS[v]
                    i += len(onset) + 1
                    # long vowels (ou, uu, aa, ei written as ee) collapse to one
                    if i < len(word) and word[i] in "ou" and v in "ou":
                        i += 1
                    phones.append(vowel)
                    break
        else:
            if word[i] == "n":  # syllabic n
                phones.append("N")
                i += 1
            else:
                return None
    return " ".join(phones)


_ENGLISH_RULES = (
    ("tion", "SH AH N"), ("ph", "F"), ("sh", "SH"), ("ch", "CH"), ("th", "TH"),
    ("ck", "K"), ("ng", "NG"), ("qu", "K W"), ("ee", "IY"), ("ea", "IY"), ("oo", "UW"),
    ("ou", "AW"), ("ai", "EY"), ("ay", "EY"), ("ie", "IY"), ("ei", "EY"), ("oa", "OW"),
    ("au", "AO"), ("aw", "AO"), ("ow", "OW"), ("oi", "OY"), ("oy", "OY"), ("ya", "Y AA"),
    ("iya", "IY Y AA"), ("a", "AA"), ("e", "EH"), ("i", "IH"), ("o", "OW"), ("u", "UW"),
    ("b", "B"), ("c", "K"), ("d", "D"), ("f", "F"), ("g", "G"), ("h", "HH"), ("j", "JH"),
    ("k", "K"), ("l", "L"), ("m", "M"), ("n", "N"), ("p", "P"), ("q", "K"), ("r", "R"),
    ("s", "S"), ("t", "T"), ("v", "V"), ("w", "W"), ("x", "K S"), ("y", "IY"), ("z", "Z"),
)  # fmt: skip


def _english(word: str) -> str:
    """Greedy letter-to-sound rules: rough, but names only need to be near."""
    phones: list[str] = []
    i = 0
    rules = sorted(_ENGLISH_RULES, key=lambda r: len(r[0]), reverse=True)
    while i < len(word):
        for graph, ph in rules:
            if word.startswith(graph, i):
                if graph == "c" and word[i + 1 : i + 2] in ("e", "i", "y"):
                    ph = "S"
                if graph == "e" and i == len(word) - 1 and phones:
                    ph = ""  # silent final e
                if graph == "y" and i + 1 < len(word) and word[i + 1] in "aeiou":
                    ph = "Y"
                if ph and (not phones or phones[-1] != ph):
                    phones.append(ph)
                i += len(graph)
                break
        else:
            i += 1  # apostrophes and anything unexpected
    return " ".join(phones) or "AH"


def guess_pronunciation(word: str) -> str:
    """A pronunciation for a word cmudict lacks (romaji rules first, then English)."""
    return _romaji(word) or _english(word)


# --- written form -> spoken form (for Whisper's output and for WER scoring) --------

_CURRENCY_SYMBOLS = {
    "$": ("dollar", "cent"),
    "€": ("euro", "cent"),
    "£": ("pound", "penny"),
    "¥": ("yen", ""),
}
_ORDINALS = {
    1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh",
    8: "eighth", 9: "ninth", 10: "tenth", 11: "eleventh", 12: "twelfth", 13: "thirteenth",
    14: "fourteenth", 15: "fifteenth", 16: "sixteenth", 17: "seventeenth", 18: "eighteenth",
    19: "nineteenth", 20: "twentieth", 30: "thirtieth",
}  # fmt: skip
_MONEY_RE = re.compile(r"([$€£¥])\s?(\d[\d,]*)(?:\.(\d{1,2}))?")
_ORDINAL_RE = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_DECIMAL_RE = re.compile(r"\b(\d+)\.(\d+)\b")
_INT_RE = re.compile(r"\b\d[\d,]*\b")


def _plural(word: str, n: int) -> str:
    if n == 1 or word == "yen":
        return word
    return "pence" if word == "penny" else word + "s"


def _money(m: re.Match[str]) -> str:
    unit, sub = _CURRENCY_SYMBOLS[m.group(1)]
    whole = int(m.group(2).replace(",", ""))
    out = f"{number_words(whole)} {_plural(unit, whole)}"
    cents = int((m.group(3) or "0").ljust(2, "0"))
    if cents and sub:
        out += f" {number_words(cents)} {_plural(sub, cents)}"
    return out


def _ordinal(n: int) -> str:
    if n in _ORDINALS:
        return _ORDINALS[n]
    if n < 100 and n % 10 and n // 10 >= 2:
        return f"{_TENS[n // 10]} {_ORDINALS[n % 10]}"
    return number_words(n) + "th"


def spoken_form(text: str) -> str:
    """Whisper-style written text -> the decoder's token form ("$250." -> "two hundred
    fifty dollars"), so both embedded decoders hand the pipeline the same style."""
    t = text.replace("’", "'").replace("&", " and ").replace("%", " percent")
    t = _MONEY_RE.sub(_money, t)
    t = _ORDINAL_RE.sub(lambda m: _ordinal(int(m.group(1))), t)
    t = _DECIMAL_RE.sub(
        lambda m: (
            f"{number_words(int(m.group(1)))} point " + " ".join(_ONES[int(d)] for d in m.group(2))
        ),
        t,
    )
    t = _INT_RE.sub(lambda m: f" {number_words(int(m.group(0).replace(',', '')))} ", t)
    return normalize_phrase(t)
