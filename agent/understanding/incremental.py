"""Understanding overlapped with streaming ASR partials (sans-I/O).

One `PartialTracker` per turn. Feed it each ASR partial as it arrives; it understands the
newest text (normalisation, payee lookup, intent) and keeps the result. Work on a partial
that has been superseded is simply dropped: each call is a few hundred microseconds and
runs to completion, so "cancelling" stale work means never looking at its result, and the
caller may skip partials altogether when it is behind (`wants` says whether a text is new).
When the final transcript arrives, `final()` returns the cached result if the final equals
the last partial (the common case: the result was ready before the final existed), and
otherwise understands it with the payee index and the name lookups already warm.

The per-call payee index is built on the first partial, not on the final, which is where
most of the saving comes from for a caller with hundreds of payees.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agent.understanding.payees import Payee, PayeeIndex
from agent.understanding.understander import (
    Completeness,
    Understander,
    Understanding,
    completeness_of,
    dangling,
)


def _key(text: str) -> str:
    return " ".join(text.lower().split())


class PartialTracker:
    def __init__(
        self,
        nlu: Understander,
        *,
        payees: Sequence[Payee] | PayeeIndex = (),
        now: datetime | None = None,
        default_currency: str | None = None,
    ) -> None:
        self._nlu = nlu
        self._payees: Sequence[Payee] | PayeeIndex = payees
        self._index: PayeeIndex | None = None
        self._now = now
        self._currency = default_currency
        self._last_key: str | None = None
        self._last: Understanding | None = None
        self.partials_seen = 0
        self.partials_understood = 0

    def _index_once(self) -> Sequence[Payee] | PayeeIndex:
        if self._index is None and self._payees:
            self._index = self._nlu.payee_index(self._payees)
        return self._index if self._index is not None else ()

    def wants(self, text: str) -> bool:
        """Whether this partial differs from the last one understood."""
        return _key(text) != self._last_key

    def update(self, partial: str) -> Understanding | None:
        """Understand a partial; None when it adds nothing over the previous one."""
        self.partials_seen += 1
        key = _key(partial)
        if key == self._last_key or not key:
            return None
        u = self._nlu.understand(
            partial, payees=self._index_once(), now=self._now, default_currency=self._currency
        )
        self._last_key, self._last = key, u
        self.partials_understood += 1
        return u

    def completeness(self, partial: str) -> Completeness:
        """Adaptive end of turn for this partial, reusing its understanding when cached."""
        cut = dangling(partial)
        if cut is not None:
            return cut
        if self._last is None or _key(partial) != self._last_key:
            self.update(partial)
        return completeness_of(self._last) if self._last is not None else "unknown"

    def final(self, text: str) -> Understanding:
        """The understanding of the final transcript: cached when it equals the last partial."""
        if self._last is not None and _key(text) == self._last_key:
            return self._last
        u = self._nlu.understand(
            text, payees=self._index_once(), now=self._now, default_currency=self._currency
        )
        self._last_key, self._last = _key(text), u
        return u
