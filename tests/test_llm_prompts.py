"""Prompts are prefix-stable and the extraction schema holds the real candidate ids."""

from __future__ import annotations

import orjson

from agent.llm import prompts
from agent.llm.client import LLMClient
from agent.llm.extraction import InvalidExtraction, check_policy, parse, validate
from agent.understanding import Payee
from agent.understanding.understander import MONEY_INTENTS


def _body(text: str, payees: list[Payee], context: object) -> bytes:
    views = prompts.as_candidates(payees)
    client = LLMClient("http://127.0.0.1:9")
    body = client.request_body(
        prompts.extraction_messages(text, views, context),
        max_tokens=96,
        response_format=prompts.response_format(prompts.extraction_schema([v.id for v in views])),
        rid="fixed",
    )
    return orjson.dumps(body["messages"])


def _common_prefix(a: bytes, b: bytes) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_two_different_requests_share_a_byte_identical_prefix() -> None:
    a = _body(
        "send the money to ken",
        [Payee("p-ken-sato", "Ken Sato"), Payee("p-ken-saito", "Ken Saito")],
        ["last transfer: p-ken-sato (Ken Sato), 5000 JPY"],
    )
    b = _body(
        "pay priya fifty pounds",
        [Payee("p-priya-patel", "Priya Patel")],
        {"currency": "GBP"},
    )
    shared = _common_prefix(a, b)
    system = orjson.dumps([{"role": "system", "content": prompts.EXTRACTION_SYSTEM}])[:-1]
    # The whole system prompt (rules, fields, examples) and the start of the user message
    # are identical; the first difference is inside the variable part.
    assert shared >= len(system) + len(b',{"role":"user","content":"Candidates:\\n- ')
    assert a[:shared] == b[:shared]
    assert b"p-ken-sato" not in a[: len(system)]


def test_prefix_has_no_ids_or_times() -> None:
    for fixed in (prompts.EXTRACTION_SYSTEM, prompts.QNA_SYSTEM):
        assert "call-" not in fixed and "2026" not in fixed and "p-" not in fixed
    q1 = prompts.qna_messages("how late is shibuya open", [("q", "a")])
    q2 = prompts.qna_messages("what are the fees", [])
    assert q1[0] == q2[0]


def test_schema_enums_are_the_candidates_and_the_intents() -> None:
    schema = prompts.extraction_schema(["p-ken-sato", "p-ken-saito"])
    props = schema["properties"]
    assert props["recipient_id"]["enum"] == ["p-ken-sato", "p-ken-saito", "none"]
    assert props["intent"]["enum"] == list(prompts.INTENTS)
    assert schema["additionalProperties"] is False
    fmt = prompts.response_format(schema)
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == schema


def test_candidates_from_any_shape_unique_and_capped() -> None:
    views = prompts.as_candidates(
        [Payee("a", "Ann"), ("b", "Bob"), {"id": "c", "name": "Cy"}, ("a", "Ann again")]
        + [(f"x{i}", f"X {i}") for i in range(20)]
    )
    assert [v.id for v in views[:3]] == ["a", "b", "c"]
    assert len(views) == prompts.MAX_CANDIDATES


def _good(**over: object) -> str:
    data = {
        "intent": "transfer_money",
        "recipient_id": "p-ken-sato",
        "amount": 5000,
        "currency": "JPY",
        "needs_confirmation": True,
        "ambiguity": "none",
    }
    data.update(over)
    return orjson.dumps(data).decode()


def test_parse_valid_and_policy() -> None:
    schema = prompts.extraction_schema(["p-ken-sato", "p-ken-saito"])
    ex = parse(_good(), schema)
    assert ex.recipient_id == "p-ken-sato" and ex.amount == 5000 and ex.currency == "JPY"
    check_policy(ex, candidate_ids=["p-ken-sato", "p-ken-saito"], money_intents=MONEY_INTENTS)


def test_invalid_outputs_are_rejected() -> None:
    schema = prompts.extraction_schema(["p-ken-sato"])
    bad = [
        ("not json {", "not_json"),
        (_good(recipient_id="p-invented"), "schema_enum"),
        (_good(intent="wire_everything"), "schema_enum"),
        (_good(amount="5000"), "schema_type"),
        (_good(amount=-5), "schema_range"),
        (_good(extra=1), "schema_extra"),
        ('{"intent": "transfer_money"}', "schema_required"),
        ("[1, 2]", "schema_type"),
    ]
    for text, reason in bad:
        try:
            parse(text, schema)
        except InvalidExtraction as exc:
            assert exc.reason == reason, (text, exc.reason)
        else:
            raise AssertionError(f"accepted {text}")
    try:
        parse(_good(), schema, finish_reason="length")
    except InvalidExtraction as exc:
        assert exc.reason == "truncated"
    ex = parse(_good(ambiguity="recipient"), schema)
    try:
        check_policy(ex, candidate_ids=["p-ken-sato"], money_intents=MONEY_INTENTS)
    except InvalidExtraction as exc:
        assert exc.reason == "model_unsure"
    else:
        raise AssertionError("an unsure model was trusted")


def test_validate_is_the_same_contract_as_the_schema() -> None:
    schema = prompts.extraction_schema([])
    assert validate(orjson.loads(_good(recipient_id="none")), schema)["recipient_id"] == "none"
