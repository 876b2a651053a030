#!/usr/bin/env bash
# Gemma 4 E2B: the small-GPU profile (an L4 or a shared GPU). Roughly half E4B's
# effective parameters, so TTFT and TPOT hold on a 24 GB card where E4B's KV pool would be
# tight; expect it to be weaker at using account context to pick between similar payees,
# so the agent asks more clarifying questions (the validation in code is the same). More concurrent requests
# fit, so the CUDA graphs are captured up to a larger batch.
set -euo pipefail
. "$(dirname "$0")/common.sh"
exec python3 -m sglang.launch_server \
  --model-path "${SGLANG_MODEL:-google/gemma-4-E2B-it}" \
  "${SGLANG_COMMON_ARGS[@]}" \
  --cuda-graph-max-bs "${SGLANG_CUDA_GRAPH_MAX_BS:-128}" \
  "$@"
