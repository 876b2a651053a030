"""The LLM path's configuration: the ``[llm]`` section (agent/config.py adds it).

An empty ``base_url`` means no LLM is configured: the agent then runs on the fast path,
answers questions from retrieval alone and hands over what it cannot resolve.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class LLMConfig:
    base_url: str = _opt(
        "",
        "OpenAI-compatible server (SGLang, or the embedded llama-server), e.g. "
        "http://127.0.0.1:30000; empty: no LLM (fast path, retrieval answers, handoff)",
    )
    model: str = _opt("default", "model name sent in each request (SGLang: --served-model-name)")
    api_key: str = _opt("", "bearer token for the LLM server (SGLang --api-key); empty: none")
    connect_timeout_s: float = _opt(1.0, "time to open a connection to the LLM server")
    first_token_timeout_s: float = _opt(
        2.5, "time from request to the first streamed token before the request is given up"
    )
    idle_timeout_s: float = _opt(
        2.0, "longest gap between two streamed chunks before the request is given up"
    )
    extraction_budget_ms: int = _opt(
        3000,
        "whole budget for one structured extraction (request to parsed result); past it "
        "the turn degrades to a clarifying question",
    )
    answer_budget_ms: int = _opt(
        8000,
        "whole budget for one streamed QnA answer; past it the answer is cut off and, if "
        "nothing was said yet, the retrieval answer or a handoff offer is spoken",
    )
    extraction_max_tokens: int = _opt(
        96, "output cap for extraction (the JSON object is about 40-60 tokens)"
    )
    answer_max_tokens: int = _opt(
        160, "output cap for a spoken QnA answer (two or three sentences)"
    )
    temperature: float = _opt(0.0, "sampling temperature for both uses (0: deterministic)")
    max_connections: int = _opt(64, "HTTP connection pool size to the LLM server")
    abort_endpoint: bool = _opt(
        True,
        "on cancel also POST /abort_request {rid} (SGLang); a 404 turns it off for the "
        "process and closing the stream alone stops generation",
    )
    thinking: bool = _opt(
        False, "send chat_template_kwargs.enable_thinking (off: no reasoning tokens)"
    )
    send_chat_template_kwargs: bool = _opt(
        True, "send chat_template_kwargs at all (SGLang and llama-server accept it)"
    )
    mtp_for_extraction: bool = _opt(
        False,
        "extraction goes to extraction_base_url (an MTP/speculative profile) when set; "
        "reports disagree on MTP for short JSON output, so it is off by default",
    )
    extraction_base_url: str = _opt(
        "", "a second server for extraction (e.g. the non-MTP E4B profile); empty: base_url"
    )
    faq_direct_score: float = _opt(
        0.6,
        "retrieval confidence (0..1) at which the best FAQ answer is read out directly, "
        "without the LLM",
    )
    faq_min_score: float = _opt(
        0.2,
        "retrieval confidence below which no passage is relevant: no LLM call, the caller "
        "is offered a colleague; between this and faq_direct_score the LLM answers from the "
        "top passages",
    )
    faq_passages: int = _opt(3, "FAQ passages put after the stable prefix of a QnA prompt")
