"""Process-wide components, built once from the configuration and shared by every call."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from agent.asr.base import SpeechRecognizer
from agent.audio.endpointer import EndpointerConfig
from agent.audio.vad import SileroVAD
from agent.config import ASRConfig, Config
from agent.understanding import Understander


def build_recognizer(config: ASRConfig) -> SpeechRecognizer:
    if config.backend == "embedded":
        from agent.asr.embedded import EmbeddedRecognizer

        return EmbeddedRecognizer(
            confirm_with_whisper=config.whisper_confirm,
            partial_interval_ms=config.partial_interval_ms,
            whisper_threads=config.whisper_threads,
        )
    if config.backend == "riva":
        from agent.asr.riva import RivaRecognizer

        return RivaRecognizer(
            config.riva_uri,
            use_ssl=config.riva_use_ssl,
            language=config.riva_language,
            boost_score=config.riva_boost_score,
            request_timeout_s=config.riva_timeout_s,
        )
    raise ValueError(f"unknown ASR backend {config.backend!r}; use 'embedded' or 'riva'")


@dataclass
class Services:
    config: Config
    vad: SileroVAD
    endpointer_config: EndpointerConfig
    recognizer: SpeechRecognizer
    understander: Understander
    cpu_pool: ThreadPoolExecutor

    @classmethod
    async def build(cls, config: Config) -> Services:
        """Load models off the event loop (Whisper and the LM take a second or two)."""
        vad_config = config.vad
        endpointer = EndpointerConfig(
            threshold=vad_config.threshold,
            silence_ms=vad_config.silence_ms,
            min_speech_ms=vad_config.min_speech_ms,
            speech_pad_ms=vad_config.speech_pad_ms,
            max_utterance_s=vad_config.max_utterance_s,
        )
        vad, recognizer, understander = await asyncio.gather(
            asyncio.to_thread(SileroVAD),
            asyncio.to_thread(build_recognizer, config.asr),
            asyncio.to_thread(Understander.load),
        )
        pool = ThreadPoolExecutor(config.server.cpu_workers, thread_name_prefix="cpu")
        return cls(config, vad, endpointer, recognizer, understander, pool)

    async def aclose(self) -> None:
        await self.recognizer.aclose()
        self.cpu_pool.shutdown(wait=False, cancel_futures=True)
