"""The LLM path: a streaming client for OpenAI-compatible servers (SGLang, llama-server),
prefix-stable prompts, schema-constrained extraction checked in code, and the router that
decides when the LLM is asked at all. See docs/LLM.md.

The ``sglang`` package is never imported here (it pulls in torch): SGLang is spoken to
over HTTP.
"""

# Exported lazily (PEP 562): agent.config imports agent.llm.config for the [llm]
# section, and that must not pull in the HTTP client and the router.
_EXPORTS = {
    "ChatStream": "agent.llm.client",
    "Completion": "agent.llm.client",
    "LLMBadResponse": "agent.llm.client",
    "LLMClient": "agent.llm.client",
    "LLMError": "agent.llm.client",
    "LLMTimeout": "agent.llm.client",
    "LLMUnavailable": "agent.llm.client",
    "StreamStats": "agent.llm.client",
    "LLMConfig": "agent.llm.config",
    "LLM_REASONS": "agent.llm.router",
    "Router": "agent.llm.router",
}


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agent.llm' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)


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
