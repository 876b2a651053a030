"""A phrase-by-phrase synthesis stream shared by the backends.

Backends only say how to turn one phrase into audio (an async iterator of PCM16 16 kHz
pieces); this class does the rest: phrase splitting, in-order synthesis in a task of
its own, a bounded output queue, end-of-text and cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from agent.tts.base import SpeechChunk, TTSError
from agent.tts.phrases import PhraseSplitter

PhraseRenderer = Callable[[str], AsyncIterator[bytes]]

_END = object()


class PhraseSynthesisStream:
    def __init__(self, render: PhraseRenderer, *, max_pending_chunks: int = 64) -> None:
        self._render = render
        self._splitter = PhraseSplitter()
        self._phrases: asyncio.Queue[str | object] = asyncio.Queue()
        self._chunks: asyncio.Queue[SpeechChunk | BaseException | object] = asyncio.Queue(
            max_pending_chunks
        )
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    async def push(self, text: str) -> None:
        for phrase in self._splitter.push(text):
            self._enqueue(phrase)

    async def end(self) -> None:
        for phrase in self._splitter.flush():
            self._enqueue(phrase)
        self._enqueue(_END)

    def _enqueue(self, item: str | object) -> None:
        if self._closed:
            return
        if self._worker is None:
            self._worker = asyncio.create_task(self._synthesise())
        self._phrases.put_nowait(item)

    async def _synthesise(self) -> None:
        index = 0
        try:
            while (phrase := await self._phrases.get()) is not _END:
                assert isinstance(phrase, str)
                # Audio is forwarded the moment it exists; the phrase's end is an empty
                # chunk with last=True (holding a piece back to flag it would delay it).
                async for pcm in self._render(phrase):
                    await self._chunks.put(SpeechChunk(pcm, phrase, index, last=False))
                await self._chunks.put(SpeechChunk(b"", phrase, index, last=True))
                index += 1
            await self._chunks.put(_END)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # reported to the reader, which decides what to do
            await self._chunks.put(TTSError(f"speech synthesis failed: {exc}"))

    async def __aiter__(self) -> AsyncIterator[SpeechChunk]:
        while not self._closed:
            item = await self._chunks.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, SpeechChunk)
            yield item

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._worker:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker
        with contextlib.suppress(asyncio.QueueFull):
            self._chunks.put_nowait(_END)  # wake a reader waiting on the queue
