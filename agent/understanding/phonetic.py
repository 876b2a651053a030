"""Name folding and a phonetic key tuned for ASR mishearings and romanised Japanese names.

fold_name: ASCII, lower case, romaji variants collapsed (Satoh/Satou/Sato -> "sato",
Saitou -> "saito", Ohno/Oono/Ono -> "ono", shi/si, chi/ti, tsu/tu, fu/hu, ji/zi).
phonetic_key: a Metaphone-like consonant skeleton (c/k/q -> k, ph -> f, v -> b, l -> r,
d -> t, z -> s, vowels dropped after the first letter, repeats collapsed), so that
"Ken Sato" and "can sat oh" land close together. Pure functions.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_NON_ALPHA = re.compile(r"[^a-z ]+")
_SPACES = re.compile(r"\s+")
_ROMAJI = (
    ("shi", "si"),
    ("chi", "ti"),
    ("tsu", "tu"),
    ("fu", "hu"),
    ("ji", "zi"),
    ("ou", "o"),
    ("oo", "o"),
    ("uu", "u"),
    ("aa", "a"),
    ("ii", "i"),
    ("ee", "e"),
)
_OH = re.compile(r"oh(?=[^aeiou]|$)")
_PHONETIC = (
    ("ph", "f"),
    ("ck", "k"),
    ("gh", ""),
    ("kn", "n"),
    ("wr", "r"),
    ("th", "t"),
    ("sch", "sk"),
    ("sh", "s"),
    ("ch", "k"),
    ("x", "ks"),
    ("q", "k"),
)
_CSOFT = re.compile(r"c(?=[eiy])")
_TRANS = str.maketrans({"c": "k", "z": "s", "v": "b", "l": "r", "d": "t", "g": "k"})
_DROP = re.compile(r"(?<!^)[aeiouyhw]")
_REPEAT = re.compile(r"(.)\1+")


def ascii_fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    ascii_text = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _SPACES.sub(" ", _NON_ALPHA.sub(" ", ascii_text)).strip()


@lru_cache(maxsize=65536)
def fold_token(tok: str) -> str:
    tok = _OH.sub("o", tok)
    for a, b in _ROMAJI:
        tok = tok.replace(a, b)
    return tok


@lru_cache(maxsize=65536)
def fold_name(text: str) -> str:
    return " ".join(fold_token(t) for t in ascii_fold(text).split())


@lru_cache(maxsize=65536)
def token_key(tok: str) -> str:
    for a, b in _PHONETIC:
        tok = tok.replace(a, b)
    tok = _CSOFT.sub("s", tok)
    tok = tok.translate(_TRANS)
    if tok and tok[0] in "aeiouy":
        tok = "a" + tok[1:]
    tok = _DROP.sub("", tok)
    return _REPEAT.sub(r"\1", tok)


@lru_cache(maxsize=65536)
def phonetic_key(folded: str) -> str:
    """Key of an already folded name: one skeleton per token, space separated."""
    return " ".join(k for k in (token_key(t) for t in folded.split()) if k)
