"""The LLM path through the whole server: the real agent configured with the embedded
CPU LLM (llama.cpp's llama-server on 127.0.0.1, built by scripts/setup_llm), real audio.

An ambiguous spoken command ("send the money to Ken", two Kens among the payees) is
settled by the LLM with a schema-constrained candidate id and the account history as
evidence, and the conversation goes on to the read-back and the confirmation; an open
question is answered with streamed tokens. Skipped, saying so, when the LLM server has
not been built.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.llm.local import DEFAULT_MODEL, LlamaServer, find_llama_server, find_model
from clients.call import run_conversation
from clients.local_server import LocalServer
from tests.conftest import SPEECH, load_wav

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def agent_with_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    if find_llama_server() is None or find_model(DEFAULT_MODEL) is None:
        pytest.skip("llama-server or its model is not in the cache: run scripts/setup_llm")
    log = Path(tmp_path_factory.mktemp("llm")) / "llama-server.log"
    with LlamaServer(DEFAULT_MODEL, log_path=log) as llm:
        # The embedded profile's budgets, widened for a test machine that may be busy.
        flags = (
            *("--llm.base_url", llm.base_url, "--llm.abort_endpoint", "false"),
            *("--llm.first_token_timeout_s", "60", "--llm.idle_timeout_s", "20"),
            *("--llm.extraction_budget_ms", "120000", "--llm.answer_budget_ms", "120000"),
            *("--llm.answer_max_tokens", "48", "--llm.faq_direct_score", "0.99"),
        )
        with LocalServer(*flags) as agent:
            yield agent


def turn_events(result, turn: int, kind: str) -> list[dict]:
    return [e for e in result.events if e.get("turn") == turn and e["type"] == kind]


async def test_an_ambiguous_spoken_command_is_settled_by_the_llm(
    agent_with_llm: LocalServer,
) -> None:
    result = await run_conversation(
        agent_with_llm.url,
        [load_wav(SPEECH / "transfer_ambiguous.wav"), "five thousand yen", "yes"],
        turn_timeout_s=240,
    )
    first = turn_events(result, 1, "understanding")[0]
    assert first["path"] == "llm", first
    assert [c["id"] for c in first["entities"]["recipient_candidates"]] == ["p-ken-sato"]
    stages = turn_events(result, 1, "turn.metrics")[0]["stages_ms"]
    assert stages["llm_request"] <= stages["llm_first_token"] <= stages["llm_done"]
    asked = turn_events(result, 1, "response.done")[0]["text"]
    assert "Ken Sato" in asked and "how much" in asked.lower(), asked
    read_back = turn_events(result, 2, "response.done")[0]["text"]
    assert "5,000 yen" in read_back and "Ken Sato" in read_back, read_back
    done = turn_events(result, 3, "response.done")[0]["text"]
    assert done.startswith("Done"), done


async def test_an_open_question_is_answered_token_by_token(agent_with_llm: LocalServer) -> None:
    result = await run_conversation(
        agent_with_llm.url,
        ["can you explain how interest on my savings is worked out"],
        turn_timeout_s=240,
    )
    understanding = turn_events(result, 1, "understanding")[0]
    assert understanding["intent"] == "faq", understanding
    deltas = turn_events(result, 1, "response.text.delta")
    assert len(deltas) >= 3, deltas  # streamed as the tokens arrived, not in one piece
    stages = turn_events(result, 1, "turn.metrics")[0]["stages_ms"]
    assert "llm_first_token" in stages and stages["llm_first_token"] <= stages["response_done"]
