"""Entity spans that are not numbers: person names, companies/billers, account references.

Names are found after a cue ("to", "for", "from", "pay", "send", "name is", "it's") as a
run of words up to a stop word, and kept only when the run does not start with a
determiner and holds at least one word outside the common-word lexicon (or a capitalised
word in typed text). Account and card references are digit strings after "ending",
"ending in", "last four digits", "account number", etc. Pure functions over tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.understanding.dates import MONTHS, WEEKDAYS
from agent.understanding.money import MAJOR_WORDS, MINOR_WORDS
from agent.understanding.numbers import DIGIT_WORDS, NUMBER_WORDS, ORDINALS, parse_digit_string
from agent.understanding.tokens import Token

NAME_CUES = {
    "to",
    "for",
    "from",
    "pay",
    "send",
    "transfer",
    "wire",
    "give",
    "paid",
    "sent",
    "name",
    "named",
    "called",
    "it's",
    "payee",
    "recipient",
    "owe",
    "reimburse",
}
DETERMINERS = {
    "my",
    "the",
    "a",
    "an",
    "your",
    "his",
    "her",
    "our",
    "their",
    "this",
    "that",
    "these",
    "those",
    "it",
    "me",
    "him",
    "them",
    "us",
    "someone",
    "somebody",
    "anyone",
    "anybody",
    "everyone",
    "all",
    "any",
    "some",
    "another",
    "other",
    "each",
    "every",
    "which",
    "what",
    "who",
    "how",
    "where",
    "when",
    "why",
    "you",
    "i",
    "we",
    "they",
    "he",
    "she",
    "is",
    "be",
    "do",
    "get",
    "make",
    "see",
    "check",
    "know",
    "pay",
    "send",
    "transfer",
    "buy",
    "use",
    "no",
    "not",
    "yes",
    "up",
    "back",
    "out",
    "off",
    "over",
    "money",
    "cash",
    "funds",
    "there",
    "here",
    "more",
    "less",
    "much",
    "many",
    "one",
    "same",
    "whom",
    "and",
    "or",
}
STOPS = {
    "on",
    "at",
    "in",
    "by",
    "for",
    "from",
    "to",
    "with",
    "via",
    "the",
    "a",
    "an",
    "my",
    "of",
    "tomorrow",
    "today",
    "tonight",
    "yesterday",
    "next",
    "last",
    "this",
    "please",
    "now",
    "asap",
    "immediately",
    "straight",
    "straightaway",
    "some",
    "lately",
    "recently",
    "every",
    "each",
    "ago",
    "before",
    "after",
    "until",
    "till",
    "through",
    "using",
    "thanks",
    "thank",
    "speaking",
    "account",
    "accounts",
    "and",
    "or",
    "but",
    "so",
    "because",
    "cause",
    "is",
    "was",
    "were",
    "be",
    "that",
    "which",
    "who",
    "if",
    "when",
    "as",
    "about",
    "than",
    "like",
    "right",
    "then",
    "again",
    "too",
    "also",
    "instead",
    "only",
    "just",
    "it",
    "its",
    "it's",
    "into",
    "onto",
    "out",
    "up",
    "off",
    "over",
    "under",
    "between",
    "during",
    "since",
    "can",
    "could",
    "would",
    "will",
    "should",
    "do",
    "does",
    "did",
    "i",
    "you",
    "we",
    "me",
    "here",
    "there",
    "okay",
    "ok",
    "yes",
    "no",
    "um",
    "uh",
    "er",
    "erm",
    "money",
    "cash",
    "payment",
    "transfer",
    "bill",
    "bills",
    "card",
    "checking",
    "savings",
    "current",
    "same",
    "amount",
    "pls",
    "plz",
    "have",
    "has",
    "had",
    "are",
    "am",
    "must",
    "shall",
    "may",
    "might",
    "i'd",
    "i'm",
    "i'll",
    "i've",
    "they",
    "abroad",
    "overseas",
    "while",
    "where",
    "what",
    "how",
    "why",
    "yet",
    "already",
    "still",
}
# A span holding one of these is a company or a place, not a person.
COMPANY_WORDS = {
    "office",
    "restaurant",
    "kitchen",
    "subscription",
    "video",
    "shop",
    "store",
    "shopping",
    "business",
    "bank",
    "ltd",
    "limited",
    "inc",
    "co",
    "corp",
    "company",
    "services",
    "service",
    "insurance",
    "cafe",
    "bar",
    "pub",
    "pubs",
    "hotel",
    "airlines",
    "airways",
    "energy",
    "gas",
    "electric",
    "electricity",
    "water",
    "telecom",
    "mobile",
    "broadband",
    "council",
    "prime",
    "market",
    "supermarket",
    "pharmacy",
    "gym",
    "club",
    "cinema",
    "atm",
    "atms",
    "regency",
    "foods",
    "motors",
    "group",
    "plc",
    "llc",
    "online",
    "express",
    "travel",
    "rail",
    "taxi",
    "taxis",
    "uber",
    "amazon",
    "netflix",
    "spotify",
    "paypal",
}
FILLERS = {"um", "uh", "er", "erm", "hmm", "mm", "ah", "oh", "eh", "uhm", "hm", "like"}
TITLES = {"mr", "mrs", "ms", "miss", "dr", "mister", "missus", "sir", "madam", "prof"}
RELATIONS = {
    "friend",
    "brother",
    "sister",
    "mother",
    "father",
    "mom",
    "mum",
    "dad",
    "son",
    "daughter",
    "wife",
    "husband",
    "partner",
    "colleague",
    "cousin",
    "uncle",
    "aunt",
    "boss",
    "landlord",
    "landlady",
    "roommate",
    "flatmate",
    "neighbour",
    "neighbor",
    "nephew",
    "niece",
    "boyfriend",
    "girlfriend",
    "grandma",
    "grandpa",
    "grandmother",
    "grandfather",
    "buddy",
    "pal",
    "mate",
}
OF_CUES = {"account", "checking", "savings", "current", "name"}
REF_CUES = ("ending", "ends", "last", "number", "no", "account", "card")


@dataclass(frozen=True, slots=True)
class Span:
    text: str  # surface text as the caller said it
    tok_start: int
    tok_end: int
    rule: str


def _is_stop(tok: Token) -> bool:
    if tok.kind != "word":
        return True
    w = tok.text
    return (
        w in STOPS
        or w in NUMBER_WORDS
        or w in MAJOR_WORDS
        or w in MINOR_WORDS
        or w in MONTHS
        or w in WEEKDAYS
        or w in ORDINALS
        or w in ("hundred", "thousand", "million", "grand", "k")
    )


def _name_run(text: str, toks: list[Token], i: int, max_len: int = 4) -> tuple[int, int] | None:
    j = i
    while j < len(toks) and j - i < max_len:
        t = toks[j]
        if t.kind == "word" and len(t.text) == 1 and j > i and j + 1 < len(toks):
            # an initial: "mekia s. burgess"
            if toks[j + 1].text == "." and j + 2 < len(toks) and not _is_stop(toks[j + 2]):
                j += 2
                continue
        if _is_stop(t):
            break
        j += 1
    if j == i:
        return None
    return i, j


def _looks_like_name(
    text: str, toks: list[Token], start: int, end: int, lexicon: frozenset[str]
) -> bool:
    words = [t for t in toks[start:end] if t.kind == "word" and len(t.text) > 1]
    if not words or words[0].text in DETERMINERS:
        return False
    if any(t.text not in lexicon for t in words):
        return True
    typed_case = any(c.isupper() for c in text) and not text.isupper()
    return typed_case and any(text[t.start].isupper() for t in words if t.start > 0)


def _strip_possessive(name: str) -> str:
    for suffix in ("'s", "’s", "s'"):
        if name.endswith(suffix) and len(name) > len(suffix) + 1:
            return name[: -len(suffix) + (1 if suffix == "s'" else 0)]
    return name


def find_person(text: str, toks: list[Token], lexicon: frozenset[str]) -> Span | None:
    n = len(toks)
    for i, tok in enumerate(toks):
        if tok.kind != "word":
            continue
        if tok.text == "of" and i > 0 and toks[i - 1].text in OF_CUES:
            pass  # "the savings account of Tom"
        elif tok.text not in NAME_CUES:
            continue
        start = i + 1
        if tok.text == "name" and start < n and toks[start].text == "is":
            start += 1
        # "to my friend Raghav", "to Mr Raghav": the name is what follows
        if (
            start + 1 < n
            and toks[start].text in ("my", "our")
            and toks[start + 1].text in (RELATIONS)
        ):
            start += 2
        if start < n and toks[start].text in TITLES:
            start += 1
            if start < n and toks[start].text == ".":
                start += 1
        run = _name_run(text, toks, start)
        if run is None:
            continue
        s, e = run
        if _looks_like_name(text, toks, s, e, lexicon):
            if any(t.text in COMPANY_WORDS for t in toks[s:e]):
                continue  # "from Amazon Prime Video", "to passport office"
            surface = _strip_possessive(text[toks[s].start : toks[e - 1].end])
            return Span(surface, s, e, "person:after_cue_" + tok.text)
    # A bare name on its own ("lilith sharaya danaher", "ken sato"), e.g. answering "to whom?"
    words = [t for t in toks if t.kind == "word" and t.text not in FILLERS]
    if 2 <= len(words) <= 4 and all(not _is_stop(t) for t in words):
        if all(t.text not in lexicon for t in words if len(t.text) > 1):
            s = toks.index(words[0])
            e = toks.index(words[-1]) + 1
            return Span(text[toks[s].start : toks[e - 1].end], s, e, "person:bare_name")
    return None


def find_company(text: str, toks: list[Token]) -> Span | None:
    """ "pay my electricity bill" -> electricity; "a refund from Amazon Prime Video"."""
    n = len(toks)
    for i, tok in enumerate(toks):
        if tok.text in ("to", "from", "for", "with", "at", "paid", "pay") and i + 1 < n:
            j = i + 2 if toks[i + 1].text == "the" else i + 1
            run = _name_run(text, toks, j)
            if run and any(t.text in COMPANY_WORDS for t in toks[run[0] : run[1]]):
                s, e = run
                surface = text[toks[s].start : toks[e - 1].end]
                return Span(_strip_possessive(surface), s, e, "company:after_cue")
    for i, tok in enumerate(toks):
        if tok.text in ("bill", "bills") and i > 0:
            j = i
            while j > 0 and not _is_stop(toks[j - 1]) and i - j < 3:
                j -= 1
            if j < i:
                return Span(text[toks[j].start : toks[i - 1].end], j, i, "company:before_bill")
    for i, tok in enumerate(toks):
        if tok.text in ("with", "at", "to") and i + 1 < n:
            j = i + 1
            if j < n and toks[j].text == "the":
                j += 1
            e = j
            while e < n and e - j < 3 and toks[e].kind == "word" and toks[e].text not in STOPS:
                e += 1
            if e > j and text[toks[j].start].isupper():
                return Span(text[toks[j].start : toks[e - 1].end], j, e, "company:capitalised")
    return None


def find_account_ref(text: str, toks: list[Token]) -> tuple[str, Span] | None:
    """ "ending one two three four" -> "1234"; "account number 5 5 0 1"; "double five oh"."""
    n = len(toks)
    for i, tok in enumerate(toks):
        if tok.kind != "word" or tok.text not in REF_CUES:
            continue
        j = i + 1
        if tok.text in ("ending", "ends"):
            if j < n and toks[j].text in ("in", "with"):
                j += 1
        elif tok.text == "last":
            k = j
            if k < n and toks[k].text in ("four", "4", "three", "two"):
                k += 1
            if k < n and toks[k].text in ("digits", "numbers"):
                k += 1
                if k < n and toks[k].text in ("are", "is"):
                    k += 1
                j = k
            else:
                continue
        elif tok.text in ("number", "no", "account", "card"):
            if j < n and toks[j].text in ("number", "no"):
                j += 1
            if j >= n or not (
                toks[j].kind == "num"
                or toks[j].text in DIGIT_WORDS
                or toks[j].text in ("double", "triple")
            ):
                continue
        ds = parse_digit_string(toks, j)
        if ds is None:
            continue
        digits, end = ds
        if len(digits) < 2:
            continue
        return digits, Span(text[toks[j].start : toks[end - 1].end], j, end, "account_ref:digits")
    return None
