#!/usr/bin/env bash
# Gemma 4 E4B, no speculative decoding: the default for structured extraction.
# Why E4B: the middle of the family: small enough that a cached-prefix extraction is
# mostly decode time for ~40 tokens, large enough (unlike E2B, expected) to use account
# context when picking a candidate. Measure on your GPU with `python -m loadtest.llm`.
# Why no MTP here: the extraction output is ~40 tokens of grammar-constrained JSON, where
# published reports disagree on any gain from speculation (draft tokens are often
# rejected by the grammar mask), and MTP force-disables the overlap scheduler.
# Agent: llm.base_url=http://HOST:30000 (see configs/llm-sglang.toml).
set -euo pipefail
. "$(dirname "$0")/common.sh"
exec python3 -m sglang.launch_server \
  --model-path "${SGLANG_MODEL:-google/gemma-4-E4B-it}" \
  "${SGLANG_COMMON_ARGS[@]}" \
  --cuda-graph-max-bs "${SGLANG_CUDA_GRAPH_MAX_BS:-64}" \
  "$@"
