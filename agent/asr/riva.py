"""NVIDIA Riva streaming ASR backend (production, GPU-served) over gRPC asyncio.

The ``riva.client`` helpers wrap the synchronous gRPC API, which would block the event
loop; so this module drives the generated ``RivaSpeechRecognitionStub`` on a
``grpc.aio`` channel instead, one ``StreamingRecognize`` RPC per utterance.

Riva's own endpointer may split one of our utterances (VAD speech start -> speech end)
into several ``is_final`` results; they are joined, and the utterance's single final
hypothesis is emitted only after :meth:`UtteranceStream.end` once the server has closed
the stream. Riva reports word times in milliseconds from the start of the RPC's audio;
they are shifted by the utterance's first sample so that hypotheses count from the start
of the call like every other backend.

A failed stream is reopened with backoff a bounded number of times, replaying the
utterance's audio from its start (kept in memory until the utterance ends), because a
Riva replica restarting or a load balancer dropping a connection must not lose the
caller's words; when the retries are spent the iterator raises :class:`ASRError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import grpc
from riva.client.proto import riva_asr_pb2, riva_asr_pb2_grpc, riva_audio_pb2

from agent.asr.base import SAMPLE_RATE, ASRError, CallContext, Hypothesis, Word

__all__ = ["RivaEndpointing", "RivaRecognizer"]

_BYTES_PER_SAMPLE = 2
_SAMPLES_PER_MS = SAMPLE_RATE // 1000
# Audio is coalesced into requests of at most this size (200 ms), so that a replay
# after a reconnect does not send thousands of 20 ms messages.
_MAX_REQUEST_BYTES = SAMPLE_RATE // 5 * _BYTES_PER_SAMPLE
_MAX_BACKOFF_S = 2.0
# Errors that a new stream will not fix: a bad config, bad credentials, wrong model.
# (If the server rejects a stream while we are still writing audio, grpc.aio may report
# INTERNAL instead of the server's code, grpc/grpc#36066; that is retried, still bounded.)
_FATAL_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
    }
)


@dataclass(frozen=True, slots=True)
class RivaEndpointing:
    """Riva's ``EndpointingConfig``; ``None`` keeps the server's default for that field.

    Our VAD decides where an utterance ends; Riva's endpointer only decides where it
    splits the utterance into ``is_final`` results, which matters for how early stable
    text appears. Histories are in milliseconds, thresholds are probabilities (0-1).
    """

    start_history_ms: int | None = None
    start_threshold: float | None = None
    stop_history_ms: int | None = None
    stop_threshold: float | None = None
    stop_history_eou_ms: int | None = None
    stop_threshold_eou: float | None = None

    def to_proto(self) -> riva_asr_pb2.EndpointingConfig | None:
        fields = {
            "start_history": self.start_history_ms,
            "start_threshold": self.start_threshold,
            "stop_history": self.stop_history_ms,
            "stop_threshold": self.stop_threshold,
            "stop_history_eou": self.stop_history_eou_ms,
            "stop_threshold_eou": self.stop_threshold_eou,
        }
        given = {k: v for k, v in fields.items() if v is not None}
        return riva_asr_pb2.EndpointingConfig(**given) if given else None


class RivaRecognizer:
    """Process-wide Riva client: one gRPC channel shared by every call."""

    name = "riva"

    def __init__(
        self,
        uri: str = "localhost:50051",
        *,
        use_ssl: bool = False,
        ssl_root_cert: bytes | None = None,
        language: str = "en-US",
        model: str = "",
        boost_score: float = 20.0,
        endpointing: RivaEndpointing | None = None,
        request_timeout_s: float = 30.0,
        max_retries: int = 2,
        retry_backoff_s: float = 0.2,
        max_utterance_s: float = 120.0,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Configure the client; the channel opens lazily on the first call.

        Args:
            uri: ``host:port`` of the Riva server's gRPC endpoint.
            use_ssl: use TLS for the channel (Riva behind a TLS-terminating proxy or NGC).
            ssl_root_cert: PEM root certificate for TLS; ``None`` uses the system roots.
            language: BCP-47 language code sent in every request. It is authoritative
                (a Riva deployment serves the language models it was built with), so
                ``CallContext.language`` is not used by this backend.
            model: Riva model name to request; empty lets the server pick its default
                for ``language``.
            boost_score: word-boosting score given to the call's phrases (payee names,
                billers); Riva recommends roughly 10-100, higher biases more strongly.
            endpointing: Riva endpointing parameters; ``None`` keeps the server defaults.
            request_timeout_s: gRPC deadline of one ``StreamingRecognize`` RPC. It
                bounds the whole stream (the utterance's speech plus the wait for the
                final), so it must exceed the VAD's longest utterance.
            max_retries: how many times a failed stream is reopened (replaying the
                utterance's audio) before the iterator raises :class:`ASRError`.
            retry_backoff_s: delay before the first retry; it doubles on each further
                retry, capped at 2 s.
            max_utterance_s: audio kept per utterance for replay; sending more raises
                :class:`ASRError` so memory stays bounded even if the VAD never ends.
            metadata: extra gRPC metadata for every RPC, e.g. an API key
                (``("authorization", "Bearer ...")``) or a ``function-id`` for NVCF.
        """
        self.uri = uri
        self.use_ssl = use_ssl
        self.ssl_root_cert = ssl_root_cert
        self.language = language
        self.model = model
        self.boost_score = boost_score
        self.endpointing = endpointing
        self.request_timeout_s = request_timeout_s
        self.max_retries = max(0, max_retries)
        self.retry_backoff_s = retry_backoff_s
        self.max_utterance_bytes = int(max_utterance_s * SAMPLE_RATE) * _BYTES_PER_SAMPLE
        self.metadata = tuple(metadata)
        self._channel: grpc.aio.Channel | None = None
        self._stub: riva_asr_pb2_grpc.RivaSpeechRecognitionStub | None = None

    def _ensure_stub(self) -> riva_asr_pb2_grpc.RivaSpeechRecognitionStub:
        # Created inside a running loop: grpc.aio binds a channel to the current loop.
        if self._stub is None:
            options = [
                ("grpc.keepalive_time_ms", 20_000),
                ("grpc.keepalive_timeout_ms", 10_000),
                ("grpc.http2.max_pings_without_data", 0),
            ]
            if self.use_ssl:
                creds = grpc.ssl_channel_credentials(root_certificates=self.ssl_root_cert)
                self._channel = grpc.aio.secure_channel(self.uri, creds, options=options)
            else:
                self._channel = grpc.aio.insecure_channel(self.uri, options=options)
            self._stub = riva_asr_pb2_grpc.RivaSpeechRecognitionStub(self._channel)
        return self._stub

    def streaming_config(self, context: CallContext) -> riva_asr_pb2.StreamingRecognitionConfig:
        """The first request's config for a call; public so it can be inspected."""
        config = riva_asr_pb2.RecognitionConfig(
            encoding=riva_audio_pb2.AudioEncoding.LINEAR_PCM,
            sample_rate_hertz=SAMPLE_RATE,
            language_code=self.language,
            max_alternatives=1,
            audio_channel_count=1,
            enable_word_time_offsets=True,
            enable_automatic_punctuation=False,
            # Spoken form ("five thousand"): our own normaliser turns it into values and
            # keeps an audit trace, identically for every backend.
            verbatim_transcripts=True,
            model=self.model,
        )
        phrases = list(dict.fromkeys(p.strip() for p in context.phrases if p.strip()))
        if phrases:
            config.speech_contexts.append(
                riva_asr_pb2.SpeechContext(phrases=phrases, boost=self.boost_score)
            )
        if self.endpointing is not None and (ep := self.endpointing.to_proto()) is not None:
            config.endpointing_config.CopyFrom(ep)
        return riva_asr_pb2.StreamingRecognitionConfig(config=config, interim_results=True)

    async def start_call(self, context: CallContext) -> RivaCallRecognizer:
        return RivaCallRecognizer(self, self._ensure_stub(), self.streaming_config(context))

    async def aclose(self) -> None:
        if self._channel is not None:
            channel, self._channel, self._stub = self._channel, None, None
            await channel.close()


class RivaCallRecognizer:
    """Per-call state: the call's config (with its boosted phrases) and open utterances."""

    def __init__(
        self,
        recognizer: RivaRecognizer,
        stub: riva_asr_pb2_grpc.RivaSpeechRecognitionStub,
        config: riva_asr_pb2.StreamingRecognitionConfig,
    ) -> None:
        self._recognizer = recognizer
        self._stub = stub
        self._config = config
        # Weak: a finished utterance the pipeline dropped needs no closing.
        self._open: weakref.WeakSet[RivaUtteranceStream] = weakref.WeakSet()

    def utterance(self) -> RivaUtteranceStream:
        stream = RivaUtteranceStream(self._recognizer, self._stub, self._config)
        self._open.add(stream)
        return stream

    async def aclose(self) -> None:
        for stream in list(self._open):
            await stream.aclose()


class _Closed:
    """Sentinel: the stream was abandoned, iteration stops without a final."""


_CLOSED = _Closed()


class _StreamEnded(Exception):
    """The server closed the stream before we had sent all our audio."""


class RivaUtteranceStream:
    """One utterance, one RPC (plus retries); see the module docstring."""

    def __init__(
        self,
        recognizer: RivaRecognizer,
        stub: riva_asr_pb2_grpc.RivaSpeechRecognitionStub,
        config: riva_asr_pb2.StreamingRecognitionConfig,
    ) -> None:
        self._r = recognizer
        self._stub = stub
        self._config = config
        self._chunks: list[bytes] = []  # every chunk of the utterance, for replay
        self._nbytes = 0
        self._base: int | None = None  # call offset of the utterance's first sample
        self._ended = False
        self._closed = False
        self._audio_changed = asyncio.Event()
        # Bounded: if the consumer stalls, reading from Riva stalls too (HTTP/2 flow
        # control pushes back on the server) instead of memory growing.
        self._out: asyncio.Queue[Hypothesis | BaseException | _Closed] = asyncio.Queue(64)
        self._task: asyncio.Task[None] | None = None
        self._done = False  # the final (or an error) was delivered to the consumer
        # Per-attempt transcript state, reset when a stream is reopened.
        self._finals: list[str] = []
        self._final_words: list[Word] = []
        self._final_confidences: list[float] = []
        self._last_partial = ""

    # -- producer side ---------------------------------------------------------------

    async def send(self, pcm16: bytes, start_sample: int) -> None:
        if self._ended:
            raise RuntimeError("send() after end()")
        if self._closed or not pcm16:
            return
        if len(pcm16) % _BYTES_PER_SAMPLE:
            raise ValueError("PCM16 audio must have an even number of bytes")
        if self._nbytes + len(pcm16) > self._r.max_utterance_bytes:
            raise ASRError("utterance longer than the Riva backend's max_utterance_s")
        if self._base is None:
            self._base = start_sample
        self._chunks.append(bytes(pcm16))
        self._nbytes += len(pcm16)
        self._audio_changed.set()
        self._ensure_task()

    async def end(self) -> None:
        if self._ended or self._closed:
            return
        self._ended = True
        self._audio_changed.set()
        if self._base is None:
            # No audio at all: nothing to recognise, and no reason to bother Riva.
            await self._out.put(Hypothesis("", True, 0, 0, source="riva"))
            return
        self._ensure_task()

    def _ensure_task(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="riva-utterance")

    # -- consumer side ---------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Hypothesis]:
        return self

    async def __anext__(self) -> Hypothesis:
        if self._done or self._closed:
            raise StopAsyncIteration
        item = await self._out.get()
        if isinstance(item, _Closed):
            self._done = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        if item.is_final:
            self._done = True
        return item

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        # Wake a consumer blocked in __anext__; the queue may be full of stale items.
        while not self._out.empty():
            self._out.get_nowait()
        self._out.put_nowait(_CLOSED)
        self._chunks.clear()

    # -- the RPC -----------------------------------------------------------------------

    async def _requests(self) -> AsyncIterator[riva_asr_pb2.StreamingRecognizeRequest]:
        """Config, then the utterance's audio from its start, then half-close on end()."""
        yield riva_asr_pb2.StreamingRecognizeRequest(streaming_config=self._config)
        index = 0
        while True:
            if index < len(self._chunks):
                batch = [self._chunks[index]]
                size = len(batch[0])
                index += 1
                while index < len(self._chunks) and size + len(self._chunks[index]) <= (
                    _MAX_REQUEST_BYTES
                ):
                    batch.append(self._chunks[index])
                    size += len(self._chunks[index])
                    index += 1
                yield riva_asr_pb2.StreamingRecognizeRequest(audio_content=b"".join(batch))
            elif self._ended:
                # Half-close only on a real end: aclose() must cancel the RPC instead,
                # so that the server stops work rather than finalising the utterance.
                return
            else:
                self._audio_changed.clear()
                await self._audio_changed.wait()

    async def _run(self) -> None:
        attempt = 0
        while True:
            try:
                await self._attempt()
                return
            except asyncio.CancelledError:
                raise
            except (grpc.aio.AioRpcError, _StreamEnded) as exc:
                code = exc.code() if isinstance(exc, grpc.aio.AioRpcError) else None
                if code in _FATAL_CODES or attempt >= self._r.max_retries:
                    detail = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else exc
                    name = code.name if code is not None else "STREAM_ENDED"
                    error = ASRError(
                        f"Riva StreamingRecognize failed after {attempt + 1} attempt(s): "
                        f"{name}: {detail}"
                    )
                    error.__cause__ = exc
                    await self._out.put(error)
                    return
            except Exception as exc:  # a bug or an unexpected response: report, no retry
                error = ASRError(f"Riva stream failed: {exc!r}")
                error.__cause__ = exc
                await self._out.put(error)
                return
            await asyncio.sleep(min(self._r.retry_backoff_s * 2**attempt, _MAX_BACKOFF_S))
            attempt += 1

    async def _attempt(self) -> None:
        self._finals.clear()
        self._final_words.clear()
        self._final_confidences.clear()
        call = self._stub.StreamingRecognize(
            self._requests(),
            timeout=self._r.request_timeout_s,
            metadata=self._r.metadata or None,
        )
        try:
            async for response in call:
                partial = self._absorb(response)
                if partial is not None:
                    await self._out.put(partial)
        finally:
            # Cancels the RPC on the server when we are cancelled (aclose) or failed;
            # a no-op once the call has completed.
            call.cancel()
        if not self._ended:
            raise _StreamEnded("server closed the stream before the end of the utterance")
        await self._out.put(self._final())

    def _absorb(self, response: riva_asr_pb2.StreamingRecognizeResponse) -> Hypothesis | None:
        """Fold one response into the attempt's state; return a new partial, if any."""
        interim: list[str] = []
        interim_words: list[Word] = []
        stability: float | None = None
        processed_s = 0.0
        for result in response.results:
            processed_s = max(processed_s, result.audio_processed)
            if not result.alternatives:
                continue
            alt = result.alternatives[0]
            text = alt.transcript.strip()
            words = [self._word(w) for w in alt.words]
            if result.is_final:
                if text:
                    self._finals.append(text)
                    self._final_words.extend(words)
                    if alt.confidence:
                        self._final_confidences.append(alt.confidence)
            elif text:
                interim.append(text)
                interim_words.extend(words)
                stability = result.stability if stability is None else stability
        text = " ".join([*self._finals, *interim])
        if not text or text == self._last_partial:
            return None
        self._last_partial = text
        base = self._base or 0
        sent = self._nbytes // _BYTES_PER_SAMPLE
        # How far the server got, when it says; never past the audio actually sent.
        heard = min(round(processed_s * SAMPLE_RATE), sent) if processed_s > 0 else sent
        return Hypothesis(
            text=text,
            is_final=False,
            start_sample=base,
            end_sample=base + heard,
            # Riva gives partials a stability estimate, not a confidence; it is the
            # closest thing to "how likely this text is to stay".
            confidence=stability,
            words=(*self._final_words, *interim_words),
            source="riva",
        )

    def _word(self, info: riva_asr_pb2.WordInfo) -> Word:
        base = self._base or 0
        return Word(
            text=info.word,
            start_sample=base + info.start_time * _SAMPLES_PER_MS,
            end_sample=base + info.end_time * _SAMPLES_PER_MS,
            confidence=info.confidence or None,
        )

    def _final(self) -> Hypothesis:
        base = self._base or 0
        confidences = self._final_confidences
        return Hypothesis(
            text=" ".join(self._finals),
            is_final=True,
            start_sample=base,
            end_sample=base + self._nbytes // _BYTES_PER_SAMPLE,
            confidence=sum(confidences) / len(confidences) if confidences else None,
            words=tuple(self._final_words),
            source="riva",
        )
