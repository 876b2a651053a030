#!/usr/bin/env bash
# Gemma 4 E4B with multi-token prediction (MTP): the profile for streamed QnA answers.
# Google ships a small "assistant" checkpoint per Gemma 4 target, trained to draft tokens
# from the target's own hidden state and KV cache. SGLang accepts it as NEXTN and
# promotes it to its FROZEN_KV_MTP algorithm when the draft model is a Gemma 4 assistant.
#   --speculative-num-steps 5        draft 5 tokens ahead per verify step
#   --speculative-num-draft-tokens 6 the 5 drafts + the bonus token verified at once
#   --speculative-eagle-topk 1       a chain, not a tree: cheapest verify at batch 1-8,
#                                    which is where a voice agent's QnA traffic sits
# Spoken answers are free text of 30-80 tokens, where accepted drafts cut the time per
# output token and so the time to the end of the first sentence (what TTS waits for).
# Extraction may share this server (llm.mtp_for_extraction=true) or go to the plain E4B
# profile (llm.mtp_for_extraction=false, llm.extraction_base_url=...): reports disagree
# on MTP for short JSON output, so measure both with `python -m loadtest.llm`.
# MTP force-disables the overlap scheduler and mixed chunked prefill, and caps
# max-running-requests (48 by default); size the fleet for it.
set -euo pipefail
. "$(dirname "$0")/common.sh"
exec python3 -m sglang.launch_server \
  --model-path "${SGLANG_MODEL:-google/gemma-4-E4B-it}" \
  "${SGLANG_COMMON_ARGS[@]}" \
  --speculative-algorithm NEXTN \
  --speculative-draft-model-path "${SGLANG_DRAFT_MODEL:-google/gemma-4-E4B-it-assistant}" \
  --speculative-num-steps 5 \
  --speculative-num-draft-tokens 6 \
  --speculative-eagle-topk 1 \
  "$@"
