"""The LLM path: a streaming client for OpenAI-compatible servers (SGLang, llama-server),
prefix-stable prompts, schema-constrained extraction checked in code, and the router that
decides when the LLM is asked at all. See docs/LLM.md.

The ``sglang`` package is never imported here (it pulls in torch): SGLang is spoken to
over HTTP.
"""

from agent.llm.client import (
    ChatStream,
    Completion,
    LLMBadResponse,
    LLMClient,
    LLMError,
    LLMTimeout,
    LLMUnavailable,
    StreamStats,
)
from agent.llm.config import LLMConfig
from agent.llm.router import LLM_REASONS, Router

__all__ = [
    "LLM_REASONS",
    "ChatStream",
    "Completion",
    "LLMBadResponse",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMTimeout",
    "LLMUnavailable",
    "Router",
    "StreamStats",
]
