"""The agent's LLM client and router against a real LLM server: llama.cpp's llama-server
on 127.0.0.1, CPU only, with the pinned Qwen2.5-Coder-0.5B-Instruct GGUF.

The binary and the model are built and fetched by ``scripts/setup_llm`` (cached outside
the repository); without them these tests are skipped, saying so.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from agent.llm import LLMClient, LLMConfig, Router, prompts
from agent.llm.local import DEFAULT_MODEL, LlamaServer, find_llama_server, find_model
from agent.understanding import Payee, Understander

pytestmark = pytest.mark.slow

PAYEES = [
    Payee("p-ken-sato", "Ken Sato"),
    Payee("p-ken-saito", "Ken Saito"),
    Payee("p-yuki-tanaka", "Yuki Tanaka"),
]


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    if find_llama_server() is None or find_model(DEFAULT_MODEL) is None:
        pytest.skip(
            "llama-server or its model is not in the cache: run scripts/setup_llm "
            "(builds llama.cpp's llama-server once, ~10 min on 2 cores)"
        )
    log = Path(tmp_path_factory.mktemp("llm")) / "llama-server.log"
    with LlamaServer(DEFAULT_MODEL, log_path=log) as server:
        yield server


def router_for(server: LlamaServer) -> Router:
    return Router.build(
        LLMConfig(
            base_url=server.base_url,
            first_token_timeout_s=30.0,
            idle_timeout_s=10.0,
            extraction_budget_ms=60_000,
            answer_budget_ms=60_000,
            extraction_max_tokens=80,
            answer_max_tokens=24,
            faq_direct_score=0.99,  # send partial matches to the LLM
        )
    )


def client_for(server: LlamaServer) -> LLMClient:
    return LLMClient(server.base_url, first_token_timeout_s=30.0, idle_timeout_s=10.0)


async def test_streams_tokens_as_they_arrive(llm: LlamaServer) -> None:
    client = client_for(llm)
    arrivals = []
    async with client.stream(
        [{"role": "user", "content": "Count from one to ten in words."}], max_tokens=20
    ) as stream:
        async for delta in stream:
            arrivals.append((time.perf_counter(), delta))
    text = "".join(d for _, d in arrivals)
    assert len(arrivals) >= 5, text  # token by token, not one block at the end
    assert arrivals[-1][0] - arrivals[0][0] > 0.05
    assert stream.stats.ttft_ms is not None and stream.stats.finish_reason in ("stop", "length")
    assert stream.stats.completion_tokens and stream.stats.prompt_tokens
    await client.aclose()


async def test_schema_constrains_the_recipient_to_the_candidate_ids(llm: LlamaServer) -> None:
    """The ids are meaningless strings: only the enum in the schema can produce them."""
    client = client_for(llm)
    ids = ["zq-19", "zq-27"]
    views = [prompts.CandidateView(ids[0], "Ken Sato"), prompts.CandidateView(ids[1], "Ken Saito")]
    schema = prompts.extraction_schema(ids)
    completion = await client.complete(
        prompts.extraction_messages("send five thousand yen to ken sato", views),
        max_tokens=80,
        response_format=prompts.response_format(schema),
    )
    data = orjson.loads(completion.text)
    assert data["recipient_id"] in [*ids, "none"]
    assert data["intent"] in prompts.INTENTS
    assert completion.stats.finish_reason == "stop"
    await client.aclose()


async def test_ambiguous_command_is_resolved_to_a_candidate_id(llm: LlamaServer) -> None:
    nlu = Understander.load()
    router = router_for(llm)
    text = "send five thousand yen to ken like last time"
    u = nlu.understand(text, payees=PAYEES, default_currency="JPY")
    assert u.ambiguity_reason == "ambiguous_recipient"  # two Kens tie
    marks: list[str] = []
    resolved = await router.resolve(
        u,
        text=text,
        candidates=PAYEES,
        account_context=["last transfer: p-ken-saito (Ken Saito), 3000 JPY"],
        on_mark=marks.append,
    )
    assert marks == ["llm_request", "llm_first_token", "llm_done"]
    assert resolved.path == "llm", resolved.trace[-1]
    assert resolved.entities["recipient_candidates"] == [{"id": "p-ken-saito", "score": 1.0}]
    assert resolved.entities["amount"] == {"minor": 5000, "currency": "JPY"}
    assert resolved.ambiguity_reason is None and resolved.needs_confirmation
    await router.aclose()


async def test_ambiguous_command_reaches_the_read_back(llm: LlamaServer, tmp_path: Path) -> None:
    """Two Kens: without the LLM the dialogue asks which; with it (and the account context
    of the last transfer) the caller hears the read-back of one action to confirm."""
    from agent.bank.sqlite import SQLiteBank
    from agent.dialogue.conversation import Conversation

    bank = SQLiteBank(tmp_path / "bank.sqlite3")
    view = bank.customer_view("cust-001")
    assert view is not None
    payees = [Payee(p.id, p.name, p.kind) for p in view.payees]
    text = "send five thousand yen to ken like last time"
    u = Understander.load().understand(text, payees=payees, default_currency="GBP")
    without = Conversation(bank, customer_id="cust-001", call_id="call-a")
    said = "".join([p async for p in without.respond(u, turn=1)])
    assert "Ken Sato or Ken Saito" in said
    router = router_for(llm)
    resolved = await router.resolve(
        u,
        text=text,
        candidates=payees,
        account_context=["last transfer: p-ken-saito (Ken Saito), 3000 JPY"],
    )
    with_llm = Conversation(bank, customer_id="cust-001", call_id="call-b")
    said = "".join([p async for p in with_llm.respond(resolved, turn=1)])
    assert said.startswith("Send 5,000 yen to Ken Saito") and said.endswith("?"), said
    assert with_llm.dialogue is not None and with_llm.dialogue.mode == "confirming"
    await router.aclose()
    bank.close()


async def test_open_question_is_answered_with_streamed_tokens(llm: LlamaServer) -> None:
    router = router_for(llm)
    marks: list[str] = []
    deltas = [
        d
        async for d in router.answer(
            "how much does it cost to take money out at a convenience store",
            on_mark=marks.append,
        )
    ]
    assert len(deltas) > 3 and "".join(deltas).strip()
    assert marks == ["llm_request", "llm_first_token", "llm_done"]
    assert router.stats()["faq_llm"] == 1
    await router.aclose()


async def _slot_busy(client: LLMClient) -> bool:
    slots = (await client.http.get("/slots", timeout=5)).json()
    return any(s.get("is_processing") for s in slots)


async def test_cancel_stops_generation_on_the_server(llm: LlamaServer) -> None:
    client = client_for(llm)
    messages = [{"role": "user", "content": "Write a very long story about a bank."}]
    got = 0
    async with client.stream(messages, max_tokens=2000, extra={"ignore_eos": True}) as stream:
        async for _ in stream:
            got += 1
            if got == 3:
                assert await _slot_busy(client)
                break
    assert stream.stats.cancelled
    cancelled_at = time.monotonic()
    while await _slot_busy(client):
        assert time.monotonic() < cancelled_at + 5, "the server kept generating after the cancel"
        await asyncio.sleep(0.02)
    print(f"cancel: slot idle {1000 * (time.monotonic() - cancelled_at):.0f} ms after the close")
    # llama-server has no /abort_request: the client asked once, got 404, and stopped
    await asyncio.sleep(0.2)
    assert client.abort_supported is False
    await client.aclose()


async def test_prefix_cache_two_requests_share_the_prefix(llm: LlamaServer) -> None:
    """Rendered by the server's own chat template, two different requests share every byte
    of the fixed part; the second reuses it from the cache, and a cold prefix costs more."""
    a = prompts.extraction_messages("send the money to ken", prompts.as_candidates(PAYEES[:2]))
    b = prompts.extraction_messages("pay yuki", prompts.as_candidates(PAYEES[2:]), ["x: y"])
    client = client_for(llm)
    rendered = [
        (await client.http.post("/apply-template", json={"messages": m}, timeout=10)).json()[
            "prompt"
        ]
        for m in (a, b)
    ]
    shared = 0
    while rendered[0][shared] == rendered[1][shared]:
        shared += 1
    # everything up to the first candidate is shared: the fixed prefix is the whole system
    # message and the start of the user message
    assert prompts.EXTRACTION_SYSTEM in rendered[0][:shared]
    assert "Candidates:\n- " in rendered[0][:shared]

    schema = prompts.response_format(prompts.extraction_schema(["p-ken-sato", "p-ken-saito"]))
    await client.complete(a, max_tokens=80, response_format=schema)
    second = await client.complete(b, max_tokens=80, response_format=schema)
    fixed = len(prompts.EXTRACTION_SYSTEM) // 4  # ~4 characters per token
    assert second.stats.cached_tokens is not None and second.stats.cached_tokens > fixed

    # cold vs warm on a shorter prompt (a QnA prompt; CPU prefill is slow): a nonce in
    # front of the same messages leaves nothing to reuse
    passages = [("When is the Shibuya branch open?", "Weekdays 9 to 5, Saturdays 10 to 4.")]
    await client.complete(prompts.qna_messages("is shibuya open today", passages), max_tokens=4)
    q = prompts.qna_messages("how late is shibuya open on saturday", passages)
    warm = await client.complete(q, max_tokens=4)
    nonce = f"[{uuid.uuid4().hex}] "
    cold = await client.complete(
        [{"role": "system", "content": nonce + q[0]["content"]}, q[1]], max_tokens=4
    )
    assert warm.stats.cached_tokens and cold.stats.prompt_tokens
    assert warm.stats.cached_tokens > 0.6 * cold.stats.prompt_tokens
    assert (cold.stats.cached_tokens or 0) < 10
    # the prefill the server did (its own clock; the machine may be shared, so the
    # comparison is between two requests in a row, not against a fixed number)
    warm_ms = warm.stats.server_timings["prompt_ms"]
    cold_ms = cold.stats.server_timings["prompt_ms"]
    assert warm.stats.server_timings["prompt_n"] < cold.stats.server_timings["prompt_n"] / 2
    assert warm_ms < cold_ms, (warm.stats, cold.stats)
    print(
        f"prefix cache: extraction {second.stats.cached_tokens}/{second.stats.prompt_tokens} "
        f"tokens cached; qna cold ttft {cold.stats.ttft_ms:.0f} ms (prefill {cold_ms:.0f} ms), "
        f"warm {warm.stats.ttft_ms:.0f} ms (prefill {warm_ms:.0f} ms, "
        f"{warm.stats.cached_tokens}/{cold.stats.prompt_tokens} tokens cached)"
    )
    await client.aclose()
