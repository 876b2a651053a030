# Settings shared by every profile; sourced by the profile scripts beside this file.
# Each flag is here for the voice agent's traffic: many short requests that share one
# long, fixed prefix (system prompt + examples), a small JSON object or two or three
# spoken sentences out, and a caller waiting on the first token.
SGLANG_COMMON_ARGS=(
  --host "${SGLANG_HOST:-0.0.0.0}"
  --port "${SGLANG_PORT:-30000}"
  # The agent's prompts are under 2k tokens; a short context leaves the KV pool to
  # concurrency (more calls in flight) instead of reserving it for long documents.
  --context-length "${SGLANG_CONTEXT_LENGTH:-8192}"
  # Prefix caching (RadixAttention) is on by default: never pass --disable-radix-cache.
  # Longest-prefix-match scheduling keeps requests that share the agent's prefix together,
  # so the cached prefix is reused instead of evicted under load.
  --schedule-policy lpm
  # usage.prompt_tokens_details.cached_tokens in every response: the agent logs it per
  # request, so prefix-cache hits (or a prompt change that broke them) show in production.
  --enable-cache-report
  # Prometheus /metrics: queue time, TTFT, tokens/s, cache hit rate per model.
  --enable-metrics
  # json_schema response_format is compiled per request (the recipient enum changes
  # every time); xgrammar compiles a flat schema in about a millisecond and caches it.
  --grammar-backend xgrammar
  # Gemma 4 thinks by default; the agent turns it off per request
  # (chat_template_kwargs.enable_thinking=false), and the parser keeps any reasoning
  # text out of the content when a client forgets.
  --reasoning-parser gemma4
  # Text only: the agent sends no images or audio, so --enable-multimodal is not given
  # and the vision/audio encoders stay unloaded (memory for KV cache instead).
  --mem-fraction-static "${SGLANG_MEM_FRACTION:-0.85}"
  # Served name the agent sends as "model" (llm.model).
  --served-model-name "${SGLANG_SERVED_NAME:-default}"
)
