"""FAQ retrieval: Okapi BM25 over the bank's question/answer passages, in memory.

    index = FAQIndex.load()                        # data/faq/*.jsonl, built once
    hits = index.search("how late is the shibuya branch open on saturday", k=3)
    hits[0].answer, hits[0].confidence             # confidence 0..1

Sans-I/O after loading: ``search`` is pure and thread-safe, and takes well under a
millisecond for a few hundred passages, so it runs on the event loop.

The BM25 score ranks; ``confidence`` says whether the best passage answers the question
on its own: the IDF-weighted share of the question's content words that the passage's
question, keywords or answer contain (and the passage's own question words that the
caller used), boosted when the fast path's topic label matches the passage. The router
reads the passage out directly above ``faq_min_score`` and asks the LLM to answer from
the top passages below it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from agent.paths import PROJECT_ROOT

FAQ_DIR = PROJECT_ROOT / "data" / "faq"
K1 = 1.2
B = 0.75
QUESTION_WEIGHT = 2  # words of a passage's question (and keywords) count twice
TOPIC_BOOST = 0.25
TOPIC_SCORE = 2.0  # a passage labelled with the fast path's topic is found even by other words

_WORD_RE = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    """a about am an and any are as at be been being but by can could did do does doing
    for from get got had has have having how i if in into is it its just let me my of on
    or our please should so tell than that the their them then there these they this to
    up was we were what when where which who why will with would you your yours hi hello
    there okay ok um uh like want wanted know need""".split()
)
_IRREGULAR = {"children": "child", "men": "man", "women": "woman", "fees": "fee"}


def stem(word: str) -> str:
    """A small suffix stripper: enough to meet "hours"/"hour", "opening"/"open"."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)] + keep
            if suffix == "es" and not base.endswith(("ch", "sh", "x", "ss", "z")):
                base = word[:-1]  # "charges" -> "charge", "boxes" -> "box"
            if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2]:
                base = base[:-1]  # "stopped" -> "stop"
            return base
    return word


def terms(text: str) -> list[str]:
    words = _WORD_RE.findall(text.lower().replace("'", "").replace("’", ""))
    return [stem(w) for w in words if w not in STOPWORDS]


@dataclass(frozen=True, slots=True)
class Passage:
    id: str
    question: str
    answer: str
    source: str
    topics: tuple[str, ...] = ()
    keywords: str = ""


@dataclass(frozen=True, slots=True)
class Hit:
    passage: Passage
    score: float  # BM25
    confidence: float  # 0..1: does this passage alone answer the question?

    @property
    def question(self) -> str:
        return self.passage.question

    @property
    def answer(self) -> str:
        return self.passage.answer


def spoken_answer(text: str, max_sentences: int = 3) -> str:
    """The first sentences of a passage, one repeated sentence dropped (upstream rows
    repeat themselves), for reading out."""
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(text.split()))
    out: list[str] = []
    for s in sentences:
        if s and s not in out:
            out.append(s)
        if len(out) >= max_sentences:
            break
    return " ".join(out)


class FAQIndex:
    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)
        self._doc_terms: list[Counter[str]] = []
        self._head_terms: list[set[str]] = []
        df: Counter[str] = Counter()
        for p in self.passages:
            head = terms(f"{p.question} {p.keywords}")
            body = terms(p.answer)
            counts = Counter(body)
            for t in head:
                counts[t] += QUESTION_WEIGHT
            self._doc_terms.append(counts)
            self._head_terms.append(set(head))
            df.update(counts.keys())
        n = max(len(self.passages), 1)
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self._unseen_idf = math.log(1 + (n + 0.5) / 0.5)
        lengths = [sum(c.values()) for c in self._doc_terms]
        self._lengths = lengths
        self._avg_len = sum(lengths) / n if lengths else 1.0

    @classmethod
    def load(cls, directory: Path = FAQ_DIR) -> FAQIndex:
        passages = []
        for path in sorted(directory.glob("*.jsonl")):
            for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                row = orjson.loads(line)
                passages.append(
                    Passage(
                        id=str(row.get("id") or f"{path.stem}:{n}"),
                        question=row["question"],
                        answer=row["answer"],
                        source=path.name,
                        topics=tuple(row.get("topics") or ()),
                        keywords=row.get("keywords", ""),
                    )
                )
        return cls(passages)

    def __len__(self) -> int:
        return len(self.passages)

    def idf(self, term: str) -> float:
        return self._idf.get(term, self._unseen_idf)

    def search(self, question: str, k: int = 3, *, topic: str | None = None) -> list[Hit]:
        query = list(dict.fromkeys(terms(question)))  # unique, in order
        if not query or not self.passages:
            return []
        scored: list[tuple[float, int]] = []
        for i, counts in enumerate(self._doc_terms):
            norm = K1 * (1 - B + B * self._lengths[i] / self._avg_len)
            score = 0.0
            for t in query:
                tf = counts.get(t, 0)
                if tf:
                    score += self.idf(t) * tf * (K1 + 1) / (tf + norm)
            if topic and topic in self.passages[i].topics:
                score = score * (1 + TOPIC_BOOST) + TOPIC_SCORE
            if score > 0:
                scored.append((score, i))
        scored.sort(reverse=True)
        return [Hit(self.passages[i], s, self._confidence(query, i, topic)) for s, i in scored[:k]]

    def _confidence(self, query: Iterable[str], i: int, topic: str | None) -> float:
        query = list(query)
        counts = self._doc_terms[i]
        total = sum(self.idf(t) for t in query)
        covered = sum(self.idf(t) for t in query if t in counts)
        recall = covered / total if total else 0.0
        # and the passage's own question should be mostly about what was asked
        head = self._head_terms[i]
        head_q = terms(self.passages[i].question)
        hq_total = sum(self.idf(t) for t in set(head_q)) or 1.0
        precision = sum(self.idf(t) for t in set(head_q) if t in query) / hq_total
        conf = 0.7 * recall + 0.3 * precision
        if not head & set(query):
            conf *= 0.5  # matched only in the answer text
        if topic and topic in self.passages[i].topics:
            conf = min(1.0, conf + TOPIC_BOOST * (1 - conf))
        return round(conf, 3)
