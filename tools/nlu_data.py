"""Load the NLU corpora under data/nlu/ and split them into train and dev, deterministically.

Shared by tools/train_intents.py and tools/eval_understanding.py so that training never
sees a dev example. Dev splits: CLINC150 val (every domain), a 15% hash slice of BANKING77
train, NLU++ folds 7-9, a 20% hash slice of SGD dialogues. The mapping from source labels
to our intents follows data/nlu/intent_map.json.
"""

from __future__ import annotations

import csv
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "data" / "nlu"
NLUPP_DEV_FOLDS = (7, 8, 9)

# CLINC150 intents outside the banking domains that are banking-adjacent questions.
CLINC_ADJACENT_FAQ = {"exchange_rate"}
RASA_MAP = {
    "check_balance": "check_balance",
    "transfer_money": "transfer_money",
    "pay_cc": "pay_bill",
    "search_transactions": "recent_transactions",
    "human_handoff": "human_handoff",
    "affirm": "confirm",
    "deny": "deny",
    "ask_transfer_charge": "faq",
    "greet": "out_of_scope",
    "goodbye": "out_of_scope",
    "thankyou": "out_of_scope",
    "out_of_scope": "out_of_scope",
    "check_human": "out_of_scope",
}
IBM_MAP = {
    "accountbalance": "check_balance",
    "Viewtransactions": "recent_transactions",
    "payment": "pay_bill",
    "FundTransfer": "transfer_money",
    "representative": "human_handoff",
    "LostCard": "lock_card",
    "nonsense": "out_of_scope",
    "branchInfo": "faq",
    "Forgotpassword": "faq",
    "discoTerms": "faq",
    "register": "faq",
    "Greetings": "out_of_scope",
}

Example = tuple[str, str]  # (text, intent)


def _jsonl(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _bucket(key: str, n: int = 100) -> int:
    return zlib.crc32(key.encode("utf-8")) % n


def intent_map() -> dict:
    return json.loads((ROOT / "intent_map.json").read_text(encoding="utf-8"))


def clinc_label(intent: str, domain: str, mapping: dict[str, str]) -> str:
    if intent in mapping and not intent.startswith("_"):
        return mapping[intent]
    if intent in CLINC_ADJACENT_FAQ:
        return "faq"
    return "out_of_scope"


def clinc(split: str) -> list[tuple[str, str, str]]:
    """(text, mapped intent, source intent) for every CLINC150 file of a split."""
    mapping = intent_map()["clinc150"]
    out = []
    for part in ("banking", "credit_cards", "oos", "other_in_scope"):
        for row in _jsonl(ROOT / "clinc150" / f"clinc150_{part}_{split}.jsonl"):
            out.append(
                (row["text"], clinc_label(row["intent"], row["domain"], mapping), row["intent"])
            )
    return out


def banking77(split: str) -> list[tuple[str, str]]:
    """(text, topic); split 'train' or 'dev' (a 15% hash slice held out)."""
    out = []
    with (ROOT / "banking77" / "train.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            is_dev = _bucket(row["text"]) < 15
            if is_dev == (split == "dev"):
                out.append((row["text"], row["category"]))
    return out


def nlupp(folds: tuple[int, ...]) -> list[dict]:
    rows: list[dict] = []
    for i in folds:
        rows.extend(json.loads((ROOT / "nlupp" / f"fold{i}.json").read_text(encoding="utf-8")))
    return rows


def nlupp_intent(row: dict) -> str | None:
    """Our intent for an NLU++ row, where its multi-label set maps cleanly; else None."""
    labels = set(row.get("intents", []))
    if not labels:
        return None
    if labels <= {"affirm", "acknowledge", "thank"} and "affirm" in labels and not row.get("slots"):
        return "confirm"
    if labels <= {"deny", "thank"} and "deny" in labels and not row.get("slots"):
        return "deny"
    if "handoff" in labels:
        return "human_handoff"
    if {"card", "cancel_close_leave_freeze"} <= labels and labels <= {
        "card",
        "cancel_close_leave_freeze",
        "lost_stolen",
        "contactless",
        "debit",
        "credit",
    }:
        return "lock_card"
    return None


def sgd(split: str) -> list[tuple[str, str, dict]]:
    """(text, intent or '', row) for SGD Banks_1 user turns; 20% of dialogues are dev."""
    out = []
    for row in _jsonl(ROOT / "sgd" / "sgd_train_user_turns.jsonl"):
        is_dev = _bucket(row["dialogue_id"]) < 20
        if is_dev != (split == "dev"):
            continue
        acts = set(row["user_acts"])
        label = ""
        if acts == {"INFORM_INTENT"} or acts == {"INFORM_INTENT", "INFORM"}:
            label = {"CheckBalance": "check_balance", "TransferMoney": "transfer_money"}.get(
                row["active_intent"], ""
            )
        elif acts == {"AFFIRM"}:
            label = "confirm"
        elif acts in ({"NEGATE"}, {"NEGATE_INTENT"}):
            label = "deny"
        out.append((row["text"], label, row))
    return out


def rasa() -> list[Example]:
    return [
        (r["text"], RASA_MAP[r["intent"]])
        for r in _jsonl(ROOT / "rasa_financial" / "financial_demo_nlu.jsonl")
        if r["intent"] in RASA_MAP
    ]


def ibm() -> list[Example]:
    return [
        (r["text"], IBM_MAP[r["intent"]])
        for r in _jsonl(ROOT / "ibm_banking" / "watson_intents.jsonl")
        if r["intent"] in IBM_MAP
    ]
