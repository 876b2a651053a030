#!/usr/bin/env bash
# Gemma 4 12B: the quality profile for QnA wording and hard ambiguity, on one H200 (bf16
# weights ~24 GB leave most of the 141 GB for KV cache at --mem-fraction-static 0.85).
# Several times E4B's time per token: use it where answers matter more than the last
# 100 ms, e.g. as llm.base_url for QnA while extraction stays on E4B
# (llm.mtp_for_extraction=false, llm.extraction_base_url=the E4B server). Check the exact
# model id and the SGLang version that supports it (the encoder-free 12B needs a recent
# SGLang) before deploying; chunked prefill keeps a long FAQ prompt from stalling the
# decode of other calls.
set -euo pipefail
. "$(dirname "$0")/common.sh"
exec python3 -m sglang.launch_server \
  --model-path "${SGLANG_MODEL:-google/gemma-4-12B-it}" \
  "${SGLANG_COMMON_ARGS[@]}" \
  --chunked-prefill-size "${SGLANG_CHUNKED_PREFILL:-4096}" \
  --cuda-graph-max-bs "${SGLANG_CUDA_GRAPH_MAX_BS:-32}" \
  "$@"
