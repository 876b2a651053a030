"""Payee and biller candidate lookup: fuzzy string scores plus a phonetic key.

PayeeIndex is built per call from the caller's saved payees (cheap: ~1,000 names fold in
about a millisecond) and scores every entry with rapidfuzz on three views of the name:
the romaji-folded text (Sato/Satoh/Satou agree), the same without spaces ("ken sat oh"),
and the phonetic skeleton. BillerDirectory indexes a large directory (100,000 entries)
by phonetic token keys and token prefixes, then scores only the candidates. Both return
top-k (id, score) pairs drawn from their own entries: they never invent an id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from rapidfuzz import fuzz, process

from agent.understanding.phonetic import fold_name, phonetic_key, token_key


@dataclass(frozen=True, slots=True)
class Payee:
    id: str
    name: str
    kind: str = "person"  # "person" or "biller"


@dataclass(frozen=True, slots=True)
class Candidate:
    id: str
    name: str
    score: float  # 0..1

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "score": round(self.score, 3)}


class _Views:
    __slots__ = ("folded", "keys", "squashed")

    def __init__(self, names: Iterable[str]) -> None:
        self.folded: list[str] = []
        self.squashed: list[str] = []
        self.keys: list[str] = []
        for name in names:
            f = fold_name(name)
            self.folded.append(f)
            self.squashed.append(f.replace(" ", ""))
            self.keys.append(phonetic_key(f))


def _score_views(
    query: str, views: _Views, idx: Sequence[int] | None, limit: int, cutoff: float
) -> list[tuple[int, float]]:
    qf = fold_name(query)
    if not qf:
        return []
    qs = qf.replace(" ", "")
    qk = phonetic_key(qf)
    best: dict[int, float] = {}

    def run(q: str, choices: list[str], scorer, weight: float) -> None:
        if not q:
            return
        pool = choices if idx is None else {i: choices[i] for i in idx}
        for _choice, score, key in process.extract(
            q, pool, scorer=scorer, limit=limit * 3, score_cutoff=cutoff * 100 / weight
        ):
            s = score * weight / 100
            if s > best.get(key, 0.0):
                best[key] = s

    run(qf, views.folded, fuzz.WRatio, 1.0)
    run(qs, views.squashed, fuzz.ratio, 0.97)
    run(qk, views.keys, fuzz.ratio, 0.9)
    return sorted(best.items(), key=lambda kv: -kv[1])[:limit]


class PayeeIndex:
    """Per-call index of a caller's saved payees and billers."""

    def __init__(self, payees: Sequence[Payee]) -> None:
        self.payees = list(payees)
        self._views = _Views(p.name for p in self.payees)

    def __len__(self) -> int:
        return len(self.payees)

    def search(self, query: str, k: int = 5, cutoff: float = 0.55) -> list[Candidate]:
        if not self.payees:
            return []
        scored = _score_views(query, self._views, None, k, cutoff)
        return [Candidate(self.payees[i].id, self.payees[i].name, s) for i, s in scored]


class BillerDirectory:
    """Indexed lookup over a large biller directory (100,000 entries and more)."""

    MAX_CANDIDATES = 500

    def __init__(self, entries: Iterable[Payee]) -> None:
        self.entries = list(entries)
        self._views = _Views(e.name for e in self.entries)
        postings: dict[str, list[int]] = defaultdict(list)
        for i, folded in enumerate(self._views.folded):
            for tok in set(folded.split()):
                postings["k:" + token_key(tok)].append(i)
                postings["p:" + tok[:4]].append(i)
        self._postings = {k: np.asarray(v, dtype=np.int32) for k, v in postings.items()}

    def __len__(self) -> int:
        return len(self.entries)

    def _candidates(self, query: str) -> list[int]:
        """Entries sharing the most token keys/prefixes with the query (at most 500)."""
        hits = [
            self._postings[key]
            for tok in set(fold_name(query).split())
            for key in ("k:" + token_key(tok), "p:" + tok[:4])
            if key in self._postings
        ]
        if not hits:
            return []
        counts = np.bincount(np.concatenate(hits), minlength=len(self.entries))
        nonzero = int(np.count_nonzero(counts))
        if nonzero <= self.MAX_CANDIDATES:
            return np.flatnonzero(counts).tolist()
        top = np.argpartition(-counts, self.MAX_CANDIDATES)[: self.MAX_CANDIDATES]
        return top.tolist()

    def search(self, query: str, k: int = 5, cutoff: float = 0.55) -> list[Candidate]:
        idx = self._candidates(query)
        if not idx:
            return []
        scored = _score_views(query, self._views, idx, k, cutoff)
        return [Candidate(self.entries[i].id, self.entries[i].name, s) for i, s in scored]
