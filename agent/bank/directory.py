"""Who a caller is and whom they pay: the demo customers shipped in seed.json.

A read-only view used by the call pipeline to bias recognition (payee names) and to
look up recipients. The embedded bank backend is built from the same seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import orjson

SEED_PATH = Path(__file__).with_name("seed.json")


@dataclass(frozen=True, slots=True)
class PayeeRecord:
    id: str
    name: str
    kind: str  # "person" or "biller"


@dataclass(frozen=True, slots=True)
class CustomerProfile:
    id: str
    name: str
    currency: str  # currency of the everyday (first) account
    payees: tuple[PayeeRecord, ...]


@cache
def _profiles() -> dict[str, CustomerProfile]:
    seed = orjson.loads(SEED_PATH.read_bytes())
    return {
        c["id"]: CustomerProfile(
            id=c["id"],
            name=c["name"],
            currency=c["accounts"][0]["currency"],
            payees=tuple(PayeeRecord(p["id"], p["name"], p["kind"]) for p in c["payees"]),
        )
        for c in seed["customers"]
    }


def customer_profile(customer_id: str) -> CustomerProfile | None:
    return _profiles().get(customer_id)
