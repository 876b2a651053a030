"""Routing and degradation without a model: no LLM configured, an LLM that is down, one
that stalls, and the cancel contract (close the stream + POST /abort_request {rid}).

The stalling and streaming peers are real HTTP servers on 127.0.0.1 written here in a few
lines; tests/test_llm_server.py runs the same client against a real llama-server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from agent.llm import LLMClient, LLMConfig, Router
from agent.llm.client import LLMTimeout, LLMUnavailable
from agent.llm.local import free_port
from agent.llm.router import NO_ANSWER, llm_reason
from agent.understanding import Payee, Understander, Understanding

PAYEES = [
    Payee("p-ken-sato", "Ken Sato"),
    Payee("p-ken-saito", "Ken Saito"),
    Payee("p-priya-patel", "Priya Patel"),
]


def understand(text: str) -> Understanding:
    return Understander.load().understand(text, payees=PAYEES, default_currency="JPY")


@dataclass
class Peer:
    """A minimal OpenAI-style streaming server: SSE chunks every `delay` seconds."""

    delay: float = 0.05
    chunks: int = 200
    content: str | None = None  # stream this text (in three pieces) instead of "w0 w1 ..."
    finish: str = "stop"
    stall: bool = False
    abort_status: int = 200
    port: int = field(default_factory=free_port)
    aborted: list[str] = field(default_factory=list)
    disconnected: list[str] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            length = next(
                (int(x.split(":")[1]) for x in lines if x.lower().startswith("content-length")), 0
            )
            body = json.loads(await reader.readexactly(length)) if length else {}
            path = lines[0].split()[1]
            if path == "/abort_request":
                self.aborted.append(body.get("rid"))
                writer.write(
                    f"HTTP/1.1 {self.abort_status} X\r\ncontent-length: 0\r\n\r\n".encode()
                )
                await writer.drain()
                return
            if self.stall:
                await asyncio.sleep(3600)
            rid = body["rid"]
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            pieces = [f"w{i} " for i in range(self.chunks)]
            if self.content is not None:
                third = max(len(self.content) // 3, 1)
                pieces = [self.content[i : i + third] for i in range(0, len(self.content), third)]
            for i, piece in enumerate(pieces):
                await asyncio.sleep(self.delay)
                data = {"choices": [{"index": 0, "delta": {"content": piece}}]}
                payload = f"data: {json.dumps(data)}\n\n".encode()
                writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
                await writer.drain()
                self.sent[rid] = i + 1
                if reader.at_eof():
                    raise ConnectionResetError
            done = {"choices": [{"index": 0, "delta": {}, "finish_reason": self.finish}]}
            end = f"data: {json.dumps(done)}\n\n".encode()
            end += b"data: [DONE]\n\n"
            writer.write(f"{len(end):x}\r\n".encode() + end + b"\r\n0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            self.disconnected.append("x")
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def peer(**kwargs: object) -> AsyncIterator[Peer]:
    p = Peer(**kwargs)  # type: ignore[arg-type]
    server = await asyncio.start_server(p.handle, "127.0.0.1", p.port)
    try:
        yield p
    finally:
        server.close()


def config(**kwargs: object) -> LLMConfig:
    base = {
        "first_token_timeout_s": 0.5,
        "idle_timeout_s": 0.5,
        "extraction_budget_ms": 1500,
        "answer_budget_ms": 1500,
    }
    base.update(kwargs)
    return LLMConfig(**base)  # type: ignore[arg-type]


def test_llm_reason_policy() -> None:
    assert llm_reason(understand("what's my balance")) is None
    assert llm_reason(understand("send five thousand yen to ken")) == "ambiguous_recipient"
    # the first reason is missing_amount, but the two Kens tie as well
    money = understand("send the money to ken")
    assert money.ambiguity_reason == "missing_amount"
    assert llm_reason(money) == "ambiguous_recipient"
    assert llm_reason(understand("send five thousand yen to priya patel")) is None
    # "Ken Sato" is a payee's full name: Ken Saito within the margin does not need a model
    assert llm_reason(understand("send five thousand yen to ken sato")) is None
    exact = Understanding(
        "transfer_money",
        0.4,
        entities={
            "recipient_candidates": [
                {"id": "p-ken-sato", "score": 1.0},
                {"id": "p-ken-saito", "score": 0.95},
            ]
        },
        ambiguity_reason="ambiguous_recipient",
    )
    assert llm_reason(exact) is None


async def test_without_an_llm_the_fast_path_stands_and_questions_get_retrieval() -> None:
    router = Router.build(LLMConfig())
    assert not router.llm_configured
    u = understand("send five thousand yen to ken")
    out = await router.resolve(u, text="send five thousand yen to ken", candidates=PAYEES)
    assert out.path == "fast" and out.ambiguity_reason == "ambiguous_recipient"
    assert out.trace[-1].rule == "llm:unresolved" and out.trace[-1].value == "no_llm"
    confident = understand("what's my balance")
    assert await router.resolve(confident, text="what's my balance") is confident
    said = [d async for d in router.answer("how late is the shibuya branch open on saturday")]
    assert "Saturdays" in "".join(said)
    said = [d async for d in router.answer("what is the capital of france")]
    assert said == [NO_ANSWER]
    assert router.stats()["llm_skipped"] == 1 and router.stats()["fast"] == 1
    await router.aclose()


async def test_llm_down_degrades_within_the_budget() -> None:
    router = Router.build(config(base_url=f"http://127.0.0.1:{free_port()}"))
    u = understand("send five thousand yen to ken")
    start = time.perf_counter()
    out = await router.resolve(u, text="send five thousand yen to ken", candidates=PAYEES)
    assert time.perf_counter() - start < 1.5
    assert out.ambiguity_reason == "ambiguous_recipient" and out.path == "fast"
    assert out.trace[-1].value == "llm_unavailable"
    said = "".join(
        [d async for d in router.answer("how much to take money out at a convenience store")]
    )
    assert said.startswith("Here's what I have") and "110 yen" in said
    await router.aclose()


async def test_llm_that_stalls_times_out_and_the_call_still_gets_words() -> None:
    async with peer(stall=True) as p:
        router = Router.build(config(base_url=f"http://127.0.0.1:{p.port}"))
        marks: list[str] = []
        start = time.perf_counter()
        out = await router.resolve(
            understand("send five thousand yen to ken"),
            text="send five thousand yen to ken",
            candidates=PAYEES,
            on_mark=marks.append,
        )
        elapsed = time.perf_counter() - start
        assert 0.4 < elapsed < 1.6
        assert out.ambiguity_reason == "ambiguous_recipient"
        assert out.trace[-1].value == "llm_timeout"
        assert marks == ["llm_request"]
        said = [d async for d in router.answer("how much to take money out at a convenience store")]
        assert said and said[0].startswith("Here's what I have")
        await router.aclose()


async def test_cancel_closes_the_stream_and_aborts_the_rid() -> None:
    async with peer(delay=0.02) as p:
        client = LLMClient(f"http://127.0.0.1:{p.port}", first_token_timeout_s=2)
        got = []
        async with client.stream([{"role": "user", "content": "hi"}], max_tokens=500) as s:
            async for delta in s:
                got.append(delta)
                if len(got) == 5:
                    break
        await asyncio.sleep(0.3)
        assert s.stats.cancelled and p.aborted == [s.rid]
        assert p.sent[s.rid] < 30  # the server stopped soon after the disconnect
        assert p.disconnected
        await client.aclose()


async def test_abort_404_falls_back_to_closing_the_stream() -> None:
    async with peer(delay=0.02, abort_status=404) as p:
        client = LLMClient(f"http://127.0.0.1:{p.port}")
        for _ in range(2):
            async with client.stream([{"role": "user", "content": "hi"}], max_tokens=9) as s:
                async for _delta in s:
                    break
            await asyncio.sleep(0.2)
        assert client.abort_supported is False
        assert len(p.aborted) == 1  # asked once, then never again
        assert len(p.disconnected) == 2
        await client.aclose()


async def test_client_errors_are_typed() -> None:
    client = LLMClient(f"http://127.0.0.1:{free_port()}", connect_timeout_s=0.5)
    with pytest.raises(LLMUnavailable):
        await client.complete([{"role": "user", "content": "x"}], max_tokens=4)
    await client.aclose()
    async with peer(stall=True) as p:
        client = LLMClient(f"http://127.0.0.1:{p.port}", first_token_timeout_s=0.3)
        with pytest.raises(LLMTimeout):
            await client.complete([{"role": "user", "content": "x"}], max_tokens=4)
        await client.aclose()


def _answer(**over: object) -> str:
    data = {
        "intent": "transfer_money",
        "recipient_id": "p-ken-sato",
        "amount": 5000,
        "currency": "JPY",
        "needs_confirmation": True,
        "ambiguity": "none",
    }
    data.update(over)
    return json.dumps(data)


CONTEXT = ["last transfer: p-ken-sato (Ken Sato), 5000 JPY"]


async def _resolve_with(
    content: str, text: str, finish: str = "stop", context: object = CONTEXT
) -> Understanding:
    async with peer(delay=0.01, content=content, finish=finish) as p:
        router = Router.build(config(base_url=f"http://127.0.0.1:{p.port}"))
        out = await router.resolve(
            understand(text), text=text, candidates=PAYEES, account_context=context
        )
        await router.aclose()
        return out


async def test_a_valid_answer_is_applied_and_checked_in_code() -> None:
    out = await _resolve_with(_answer(amount=999), "send five thousand yen to ken")
    assert out.path == "llm" and out.ambiguity_reason is None and out.needs_confirmation
    assert out.entities["recipient_candidates"] == [{"id": "p-ken-sato", "score": 1.0}]
    # the model's 999 was not said: the normaliser's 5000 stands
    assert out.entities["amount"] == {"minor": 5000, "currency": "JPY"}
    assert "amount:llm_ignored" in [t.rule for t in out.trace]


async def test_the_model_picks_between_said_amounts_only() -> None:
    text = "send 5000 yen no sorry 6000 yen to ken sato"
    assert understand(text).ambiguity_reason == "conflicting_amounts"
    out = await _resolve_with(_answer(amount=6000), text)
    assert out.path == "llm" and out.entities["amount"] == {"minor": 6000, "currency": "JPY"}
    out = await _resolve_with(_answer(amount=7000), text)
    assert out.path == "fast" and out.trace[-1].value == "amount_not_said"


async def test_a_money_request_keeps_its_missing_amount_after_the_recipient() -> None:
    out = await _resolve_with(_answer(amount=0, currency="none"), "send the money to ken")
    assert out.path == "llm" and out.ambiguity_reason == "missing_amount"
    assert out.entities["recipient_candidates"] == [{"id": "p-ken-sato", "score": 1.0}]


@pytest.mark.parametrize(
    ("content", "finish", "why"),
    [
        (_answer(intent="check_balance", recipient_id="none"), "stop", "intent_changed"),
        (_answer(recipient_id="none"), "stop", "no_recipient"),
        (_answer(ambiguity="recipient"), "stop", "model_unsure"),
        (_answer(recipient_id="p-someone-else"), "stop", "schema_enum"),
        (_answer(intent="confirm", recipient_id="none"), "stop", "intent_not_allowed"),
        (_answer(intent="human_handoff", recipient_id="none"), "stop", "intent_not_allowed"),
        ('{"intent": "transfer_money", "recipient_id": "p-ken', "length", "truncated"),
        ("Sure! Ken Sato it is.", "stop", "not_json"),
    ],
)
async def test_invalid_answers_lead_to_a_clarifying_question(
    content: str, finish: str, why: str
) -> None:
    out = await _resolve_with(content, "send five thousand yen to ken", finish)
    assert out.path == "fast" and out.ambiguity_reason == "ambiguous_recipient"
    assert out.trace[-1].rule == "llm:unresolved" and out.trace[-1].value == why


async def test_a_tie_is_broken_only_with_evidence() -> None:
    text = "send five thousand yen to ken"
    # no account context, no distinguishing word: the model's pick is not trusted
    out = await _resolve_with(_answer(), text, context=None)
    assert out.path == "fast" and out.trace[-1].value == "no_evidence"
    # the context names the other Ken: still no evidence for this one
    other = ["last transfer: p-ken-saito (Ken Saito), 3000 JPY"]
    out = await _resolve_with(_answer(), text, context=other)
    assert out.trace[-1].value == "no_evidence"
    out = await _resolve_with(_answer(recipient_id="p-ken-saito"), text, context=other)
    assert out.path == "llm"
    assert out.entities["recipient_candidates"] == [{"id": "p-ken-saito", "score": 1.0}]
    # a payee the lookup scored well below the tie is never chosen
    out = await _resolve_with(_answer(recipient_id="p-priya-patel"), text)
    assert out.path == "fast" and out.trace[-1].value == "weaker_candidate"
