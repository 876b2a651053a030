"""Exact rules: short yes/no/cancel replies and the shape of cut-off utterances.

Where a rule is exact it beats the statistical model: "yes", "yeah go ahead", "no",
"cancel that", "never mind" are decided here, and the model is left the longer replies.
"""

from __future__ import annotations

from rapidfuzz.distance import Levenshtein

from agent.understanding.entities import FILLERS

_POLITE = {"please", "thanks", "thank", "you", "ok", "okay", "so", "well", "just", "then", "now"}
YES_WORDS = {
    "yes",
    "yeah",
    "yep",
    "yup",
    "yea",
    "ya",
    "yah",
    "aye",
    "sure",
    "correct",
    "right",
    "affirmative",
    "confirm",
    "confirmed",
    "absolutely",
    "definitely",
    "certainly",
    "indeed",
    "proceed",
    "approved",
    "agreed",
    "exactly",
    "precisely",
    "yess",
    "yesss",
    "true",
    "accepted",
    "approve",
    "accept",
    "roger",
    "yessir",
    "ok",
    "okay",
    "k",
    "kk",
}
YES_PHRASES = {
    "go ahead",
    "do it",
    "go for it",
    "that's right",
    "that is right",
    "that's correct",
    "that is correct",
    "sounds good",
    "of course",
    "please do",
    "yes please",
    "that's it",
    "you got it",
    "you're right",
    "you are right",
    "that's fine",
    "that is fine",
    "all good",
    "looks good",
    "make it so",
    "send it",
    "do that",
    "carry on",
    "i confirm",
    "that works",
    "perfect",
    "alright",
    "all right",
    "fine",
    "good",
    "great",
    "sure thing",
    "you bet",
    "by all means",
    "that's the one",
    "that is the one",
    "that's what i said",
    "that is what i said",
    "that's what i meant",
    "that is what i meant",
    "that's what i want",
    "that is what i want",
    "that's a fact",
    "that is a fact",
}
NO_WORDS = {
    "no",
    "nope",
    "nah",
    "nay",
    "negative",
    "cancel",
    "stop",
    "abort",
    "wrong",
    "incorrect",
    "halt",
    "scrap",
    "rescind",
    "negatory",
    "invalid",
    "false",
    "nix",
}
NO_PHRASES = {
    "never mind",
    "nevermind",
    "forget it",
    "forget that",
    "cancel that",
    "cancel it",
    "don't do it",
    "do not do it",
    "don't do that",
    "that's wrong",
    "that is wrong",
    "that's not right",
    "that is not right",
    "not right",
    "no way",
    "hold on",
    "not that",
    "that's not correct",
    "that is not correct",
    "not correct",
    "stop it",
    "stop that",
    "no thanks",
    "no thank you",
    "i don't want that",
    "i changed my mind",
    "scrap that",
    "not that one",
    "hang on",
    "wait a second",
    "wait a minute",
    "absolutely not",
    "certainly not",
    "of course not",
    "definitely not",
    "not now",
    "no no",
    "no stop",
    "don't send it",
    "do not send it",
    "don't",
    "cancel the transfer",
    "cancel the payment",
    "i'll pass",
    "ill pass",
    "pass",
    "hell no",
    "hell nah",
    "not true",
    "that's not true",
    "that is not true",
    "that's false",
    "that is false",
    "not at all",
    "no way jose",
    "rather not",
    "i'd rather not",
    "i would rather not",
    "prefer not",
    "i'd prefer not",
    "i would prefer not",
    "i'd prefer not to",
    "i would prefer not to",
    "better not",
    "i'd better not",
    "i think not",
    "i don't think so",
    "not really",
    "please don't",
}
# A one-word reply one typing slip away from one of these long words means it
# ("affirmitive", "definately", "absolutly"); no name or other word is that close.
_TYPO_YES = ("affirmative", "absolutely", "definitely", "certainly", "confirmed", "precisely")
_TYPO_NO = ("negative", "incorrect", "negatory")
LEADING_NO = {"no", "nope", "nah", "negative"}
LEADING_YES = {"yes", "yeah", "yep", "yup", "yea"}
# A command cut off mid-phrase ends on one of these words.
# A last word that leaves the command unfinished ("send two hundred pounds to"). Not
# "please", "that", "this" or "account": "yes please", "cancel that" and "...in my
# checking account" are whole turns, and waiting long after them was measured.
DANGLING = {
    "to",
    "for",
    "from",
    "and",
    "the",
    "my",
    "a",
    "an",
    "of",
    "pay",
    "send",
    "transfer",
    "into",
    "on",
    "at",
    "in",
    "with",
    "about",
    "is",
    "was",
    "are",
    "point",
    "minus",
    "than",
    "by",
    "your",
    "our",
    "some",
    "move",
    "wire",
    "give",
    "lock",
    "unlock",
    "freeze",
    "block",
    "ending",
    "number",
    "like",
    "um",
    "uh",
    "er",
    "erm",
    "hmm",
    "so",
    "but",
    "or",
    "because",
    "want",
    "need",
    "would",
    "could",
    "can",
    "then",
    "also",
    "check",
    "what's",
    "whats",
    "show",
    "tell",
    "me",
    "i",
    "i'm",
    "it's",
}


def core_words(words: list[str]) -> list[str]:
    return [w for w in words if w not in FILLERS]


def yes_no(words: list[str]) -> str | None:
    """'confirm' or 'deny' when the reply is a short, exact yes/no/cancel; else None."""
    core = core_words(words)
    if not core or len(core) > 6:
        return None
    phrase = " ".join(core)
    stripped = [w for w in core if w not in _POLITE] or core
    short = " ".join(stripped)
    if phrase in NO_PHRASES or short in NO_PHRASES:
        return "deny"
    if phrase in YES_PHRASES or short in YES_PHRASES:
        return "confirm"
    if not [w for w in core if w not in _POLITE] and any(w in ("ok", "okay") for w in core):
        return "confirm"  # "ok thanks"
    if len(stripped) <= 3:
        head = stripped[0]
        if head in NO_WORDS and all(w in NO_WORDS or w in YES_WORDS for w in stripped[1:]):
            return "deny"
        if all(w in YES_WORDS for w in stripped):
            return "confirm"
    if len(core) <= 5 and (
        core[-1] in ("cancel", "stop", "abort")
        or " ".join(core[-2:])
        in ("cancel it", "cancel that", "stop it", "stop that", "abort it", "never mind")
    ):
        return "deny"  # "i said cancel", "please just stop it"
    if core[0] in LEADING_YES and " ".join(core[1:]) in YES_PHRASES:
        return "confirm"
    if core[0] in LEADING_NO and " ".join(core[1:]) in NO_PHRASES | {""}:
        return "deny"
    if len(stripped) == 1 and len(stripped[0]) >= 8:
        return _typo_reply(stripped[0])
    return None


def _typo_reply(word: str) -> str | None:
    """'confirm'/'deny' for a long yes/no word with one slip (edit distance 1)."""
    for target in _TYPO_YES:
        if Levenshtein.distance(word, target, score_cutoff=1) <= 1:
            return "confirm"
    for target in _TYPO_NO:
        if Levenshtein.distance(word, target, score_cutoff=1) <= 1:
            return "deny"
    return None


def leading_reply(words: list[str]) -> str | None:
    """'deny' for a reply that opens with "no"/"nope"/"nah" ("no, leave them be"); 'confirm'
    for one that opens with "yes"/"yeah" ("yes, this is my billing address")."""
    core = core_words(words)
    if len(core) < 2:
        return None
    if core[0] in LEADING_NO:
        return "deny"
    if core[0] in LEADING_YES:
        return "confirm"
    return None


_ASSENT = {
    "true",
    "correct",
    "accurate",
    "agreed",
    "agree",
    "exactly",
    "affirmative",
    "yes",
    "yeah",
    "yep",
    "yup",
    "factual",
    "valid",
}
_DISSENT = {
    "wrong",
    "incorrect",
    "false",
    "fake",
    "invalid",
    "untrue",
    "inaccurate",
    "nope",
    "nah",
    "negative",
}
_NEGATION = {
    "not",
    "no",
    "never",
    "isn't",
    "aren't",
    "wasn't",
    "don't",
    "doesn't",
    "didn't",
    "can't",
    "won't",
    "ain't",
    "nothing",
}
_QUESTION_START = {
    "what",
    "how",
    "why",
    "when",
    "where",
    "who",
    "which",
    "is",
    "are",
    "can",
    "could",
    "do",
    "does",
    "did",
    "will",
    "would",
    "should",
    "was",
    "were",
    "what's",
    "whats",
    "how's",
    "where's",
    "who's",
    "when's",
    "why's",
}


def polarity(words: list[str]) -> str | None:
    """A short statement of agreement or disagreement: "this is a true statement" -> confirm,
    "that is not correct" -> deny, "you are not wrong about that" -> confirm."""
    core = core_words(words)
    if not core or len(core) > 10 or core[0] in _QUESTION_START:
        return None
    dissent = any(w in _DISSENT for w in core)
    negated = any(w in _NEGATION or w.endswith("n't") for w in core)
    assent = any(w in _ASSENT for w in core)
    if dissent:
        return "confirm" if negated else "deny"
    if assent:
        return "deny" if negated else "confirm"
    return None


TRANSFER_VERBS = {"send", "transfer", "wire", "pay", "move", "give", "remit", "pay back"}
_POLITE_PREFIXES = (
    ("please",),
    ("can", "you"),
    ("could", "you"),
    ("would", "you"),
    ("will", "you"),
    ("i", "want", "to"),
    ("i'd", "like", "to"),
    ("i", "would", "like", "to"),
    ("i", "need", "to"),
    ("i", "wanna"),
    ("go", "ahead", "and"),
    ("let's",),
    ("just",),
    ("ok",),
    ("okay",),
    ("so",),
    ("now",),
    ("and",),
    ("also",),
)


def imperative_verb(words: list[str]) -> str | None:
    """The command verb of an imperative ("please send ...", "can you pay ..."), else None."""
    core = core_words(words)
    changed = True
    while core and changed:
        changed = False
        for prefix in _POLITE_PREFIXES:
            if tuple(core[: len(prefix)]) == prefix:
                core = core[len(prefix) :]
                changed = True
    return core[0] if core and core[0] in TRANSFER_VERBS else None
