"""Word error rate, shared by the ASR tests and the benchmark.

Both sides are put in spoken form first (digits and currency symbols spelled out,
punctuation and case dropped), and "and" inside a number is ignored, so "$250" and
"two hundred and fifty dollars" count as the same words: the tests bound recognition
errors, not formatting.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.asr.domain import spoken_form

_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million billion".split()
)


def wer_tokens(text: str) -> list[str]:
    words = spoken_form(text).split()
    return [
        w
        for i, w in enumerate(words)
        if not (
            w == "and"
            and 0 < i < len(words) - 1
            and words[i - 1] in ("hundred", "thousand", "million")
            and words[i + 1] in _NUMBER_WORDS
        )
    ]


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Levenshtein distance over words (substitutions, insertions, deletions)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Errors / reference words for one utterance (1.0 for any output on empty ref)."""
    ref, hyp = wer_tokens(reference), wer_tokens(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return edit_distance(ref, hyp) / len(ref)


def corpus_wer(pairs: Iterable[tuple[str, str]]) -> float:
    """Total errors / total reference words over (reference, hypothesis) pairs."""
    errors = words = 0
    for reference, hypothesis in pairs:
        ref, hyp = wer_tokens(reference), wer_tokens(hypothesis)
        errors += edit_distance(ref, hyp)
        words += len(ref)
    return errors / words if words else 0.0
