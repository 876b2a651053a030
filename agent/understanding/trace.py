"""Audit trace entries: every value the normalisers produce says where it came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One normalisation step: the surface text, the value it became, and the rule used."""

    surface: str
    value: Any
    rule: str

    def to_dict(self) -> dict[str, Any]:
        return {"surface": self.surface, "value": self.value, "rule": self.rule}
