"""Process-wide components, built once from the configuration and shared by every call."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agent.asr.base import SpeechRecognizer
from agent.audio.endpointer import EndpointerConfig
from agent.audio.vad import SileroVAD
from agent.bank.backend import BankBackend
from agent.config import PROJECT_ROOT, ASRConfig, BankConfig, Config, TTSConfig
from agent.llm.router import Router
from agent.tts.base import SpeechSynthesizer
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


def build_synthesizer(config: TTSConfig) -> SpeechSynthesizer | None:
    if config.backend == "piper":
        from agent.tts.piper import PiperSynthesizer

        return PiperSynthesizer(threads=config.piper_threads)
    if config.backend == "riva":
        from agent.tts.riva import RivaSynthesizer

        return RivaSynthesizer(
            config.riva_uri, voice=config.riva_voice, language=config.riva_language
        )
    if config.backend == "none":
        return None
    raise ValueError(f"unknown TTS backend {config.backend!r}; use 'piper', 'riva' or 'none'")


def build_bank(config: BankConfig) -> BankBackend:
    """The embedded SQLite bank (the only backend so far); a relative path is under the
    project root."""
    from agent.bank.sqlite import SQLiteBank

    path = Path(config.path)
    return SQLiteBank(path if path.is_absolute() else PROJECT_ROOT / path)


@dataclass
class Services:
    config: Config
    vad: SileroVAD
    endpointer_config: EndpointerConfig
    recognizer: SpeechRecognizer
    understander: Understander
    cpu_pool: ThreadPoolExecutor
    bank: BankBackend | None = None  # set by build(); None only in hand-made Services
    tts: SpeechSynthesizer | None = None
    # The LLM path (ambiguity, questions); without an LLM server it still answers from
    # retrieval and hands over what it cannot resolve.
    router: Router | None = None

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
        vad, recognizer, understander, tts = await asyncio.gather(
            asyncio.to_thread(SileroVAD),
            asyncio.to_thread(build_recognizer, config.asr),
            asyncio.to_thread(Understander.load),
            asyncio.to_thread(build_synthesizer, config.tts),
        )
        bank = await asyncio.to_thread(build_bank, config.bank)
        # Load what the first call would otherwise pay for (LM corpus, dictionary, Whisper).
        warm_up = getattr(recognizer, "warm_up", None)
        if warm_up is not None:
            await warm_up()
        pool = ThreadPoolExecutor(config.server.cpu_workers, thread_name_prefix="cpu")
        router = await asyncio.to_thread(Router.build, config.llm)
        return cls(
            config,
            vad,
            endpointer,
            recognizer,
            understander,
            pool,
            bank=bank,
            tts=tts,
            router=router,
        )

    async def aclose(self) -> None:
        if self.bank:
            self.bank.close()
        await self.recognizer.aclose()
        if self.tts:
            await self.tts.aclose()
        if self.router:
            await self.router.aclose()
        self.cpu_pool.shutdown(wait=False, cancel_futures=True)
