"""Checking what the model returned, in code, before anything uses it.

The schema already constrains decoding on the server, but the agent never trusts that:
the output is parsed, checked against the same schema (types, enums, required fields, no
extra fields), then against banking policy. Anything that fails leads to a clarifying
question (the fast path's own ambiguity stands), never to an action:

* a recipient must be one of this request's candidate ids;
* an amount is only ever the one the deterministic normaliser read from the caller's words
  (the model's number is a cross-check; a number the normaliser did not find is dropped);
* confirmation is required by the intent, whatever the model said;
* output cut off at max_tokens (finish_reason "length") is invalid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from agent.llm.prompts import NO_RECIPIENT


@dataclass(frozen=True, slots=True)
class Extraction:
    intent: str
    recipient_id: str | None
    amount: Decimal | None  # None: no amount said
    currency: str | None
    needs_confirmation: bool
    ambiguity: str  # "none" when the model found the request clear


class InvalidExtraction(ValueError):
    """The model's output broke the schema or the policy: ask the caller instead."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def _check(value: Any, spec: Mapping[str, Any], name: str) -> None:
    kind = spec.get("type")
    if kind == "string" and not isinstance(value, str):
        raise InvalidExtraction("schema_type", f"{name} is not a string")
    if kind == "boolean" and not isinstance(value, bool):
        raise InvalidExtraction("schema_type", f"{name} is not a boolean")
    if kind == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise InvalidExtraction("schema_type", f"{name} is not a number")
    if "enum" in spec and value not in spec["enum"]:
        raise InvalidExtraction("schema_enum", f"{name}={value!r} is not allowed")
    if "minimum" in spec and value < spec["minimum"]:
        raise InvalidExtraction("schema_range", f"{name}={value!r} is below the minimum")


def validate(data: Any, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of JSON Schema that extraction_schema uses: a flat object."""
    if not isinstance(data, dict):
        raise InvalidExtraction("schema_type", "not a JSON object")
    props: Mapping[str, Mapping[str, Any]] = schema["properties"]
    missing = [k for k in schema.get("required", ()) if k not in data]
    if missing:
        raise InvalidExtraction("schema_required", f"missing {', '.join(missing)}")
    if schema.get("additionalProperties") is False:
        extra = sorted(set(data) - set(props))
        if extra:
            raise InvalidExtraction("schema_extra", f"unexpected {', '.join(extra)}")
    for name, spec in props.items():
        if name in data:
            _check(data[name], spec, name)
    return data


def parse(
    text: str,
    schema: Mapping[str, Any],
    *,
    finish_reason: str | None = "stop",
) -> Extraction:
    if finish_reason not in (None, "stop"):
        raise InvalidExtraction("truncated", f"finish_reason={finish_reason}")
    try:
        data = orjson.loads(text.strip() or b"null")
    except orjson.JSONDecodeError as exc:
        raise InvalidExtraction("not_json", str(exc)[:80]) from None
    data = validate(data, schema)
    try:
        amount = Decimal(str(data["amount"]))
    except InvalidOperation:
        raise InvalidExtraction("schema_type", "amount") from None
    recipient = data["recipient_id"]
    currency = data["currency"]
    return Extraction(
        intent=data["intent"],
        recipient_id=None if recipient == NO_RECIPIENT else recipient,
        amount=amount if amount > 0 else None,
        currency=None if currency == "none" else currency,
        needs_confirmation=data["needs_confirmation"],
        ambiguity=data["ambiguity"],
    )


def check_policy(
    extraction: Extraction,
    *,
    candidate_ids: Sequence[str],
    money_intents: frozenset[str],
) -> None:
    """Banking rules the model cannot override."""
    if extraction.recipient_id is not None and extraction.recipient_id not in candidate_ids:
        # The enum makes this impossible on a conforming server; checked all the same.
        raise InvalidExtraction("unknown_candidate", extraction.recipient_id)
    if extraction.ambiguity != "none":
        raise InvalidExtraction("model_unsure", extraction.ambiguity)
    if extraction.recipient_id is not None and extraction.intent not in money_intents:
        raise InvalidExtraction("recipient_without_payment", extraction.intent)
