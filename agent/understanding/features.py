"""Text features for the linear intent and topic models.

One function, used both by the training tool (tools/train_intents.py) and at run time, so
the two can never drift apart. Pure Python, no I/O: word unigrams and bigrams (with
sentence boundary markers, which matter for short replies such as "no"), the same over
crude stems, plus character 2-5 grams inside word boundaries; binary, L2-normalised.
"""

from __future__ import annotations

import math
import re
from itertools import pairwise

MAX_FEATURE_CHARS = 600
_TOKEN_RE = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?|\d+(?:[.,]\d+)*|[$£€¥円]", re.UNICODE)
_DIGITS_RE = re.compile(r"\d")
_CURRENCY_SYMBOLS = frozenset("$£€¥円")
# Spoken numbers look like digits to the model ("send forty two fifty" ~ "send 42.50");
# "one" stays a word ("which one", "one of my cards").
_NUMBER_WORDS = frozenset(
    "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
    " sixteen seventeen eighteen nineteen twenty thirty forty fourty fifty sixty seventy"
    " eighty ninety hundred thousand million billion".split()
)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; digit runs collapse to shape tokens, symbols to <cur>."""
    text = text[:MAX_FEATURE_CHARS].lower().replace("’", "'").replace("`", "'")
    out: list[str] = []
    for tok in _TOKEN_RE.findall(text):
        if tok in _CURRENCY_SYMBOLS:
            out.append("<cur>")
        elif tok[0].isdigit() or tok in _NUMBER_WORDS:
            out.append("<num>")
        else:
            out.append(tok)
    return out


_SUFFIXES = ("ing", "ed", "es", "s", "ly")


def stem(word: str) -> str:
    """A crude suffix stripper: "transferred"/"transfers"/"transferring" share a stem."""
    for suf in _SUFFIXES:
        if len(word) > len(suf) + 2 and word.endswith(suf):
            return word[: -len(suf)]
    return word


def extract(text: str) -> dict[str, float]:
    """Sparse feature vector (name -> weight), L2-normalised; empty for empty text."""
    toks = tokens(text)
    feats: set[str] = set()
    for tok in toks:
        feats.add("w:" + tok)
    bounded = ["<s>", *toks, "</s>"]
    for a, b in pairwise(bounded):
        feats.add("b:" + a + " " + b)
    stems = [stem(t) for t in toks]
    for a, b in pairwise(stems):
        feats.add("sb:" + a + " " + b)
    for t in stems:
        feats.add("s:" + t)
    for tok in toks:
        if tok.startswith("<"):
            continue
        padded = " " + _DIGITS_RE.sub("0", tok) + " "
        n_chars = len(padded)
        for n in (2, 3, 4, 5):
            if n > n_chars:
                break
            for i in range(n_chars - n + 1):
                feats.add("c:" + padded[i : i + n])
    if not feats:
        return {}
    w = 1.0 / math.sqrt(len(feats))
    return dict.fromkeys(feats, w)
