"""Tokenisation of ASR-style or typed text into words, numbers and symbols, with spans.

Sans-I/O and pure. Numbers keep their written form ("5,000" -> "5000", "42.50"), currency
symbols become their own tokens ("$42.50" -> "$", "42.50"; "5,000円" -> "5000", "円"), and
"1.5k" splits into "1.5" and "k". Every token keeps its character span in the original
text so the trace can quote the caller's own words.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

CURRENCY_SYMBOLS = frozenset("$£€¥円")
_TOKEN_RE = re.compile(
    r"""
    (?P<time>\d{1,2}:\d{2})
    |(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<suffix>k|m|bn|st|nd|rd|th)?(?![a-zA-Z])
    |(?P<sym>[$£€¥円])
    |(?P<word>[^\W\d_]+(?:['’-][^\W\d_]+)*)
    |(?P<punct>[.,!?;:-])
    """,
    re.VERBOSE | re.UNICODE | re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Token:
    text: str  # normalised: lower case, digits without separators
    kind: str  # "word", "num", "sym", "time", "ord", "punct"
    start: int
    end: int


def fold(text: str) -> str:
    """Lower case and strip accents (é -> e); keeps non-Latin scripts as they are."""
    text = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def tokenize(text: str) -> list[Token]:
    out: list[Token] = []
    for m in _TOKEN_RE.finditer(text):
        start, end = m.span()
        if m.group("time"):
            out.append(Token(m.group("time"), "time", start, end))
        elif m.group("num"):
            num = m.group("num").replace(",", "")
            suffix = (m.group("suffix") or "").lower()
            num_end = m.end("num")
            if suffix in ("st", "nd", "rd", "th"):
                out.append(Token(num, "ord", start, end))
            else:
                out.append(Token(num, "num", start, num_end))
                if suffix:
                    out.append(Token(suffix, "word", num_end, end))
        elif m.group("sym"):
            out.append(Token(m.group("sym"), "sym", start, end))
        elif m.group("word"):
            pos = start
            for part in m.group("word").split("-"):
                out.append(Token(fold(part), "word", pos, pos + len(part)))
                pos += len(part) + 1
        else:
            out.append(Token(m.group("punct"), "punct", start, end))
    return out
