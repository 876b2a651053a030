"""One call, top to bottom.

    transport frames --(bounded queue)--> decode + VAD + endpointer   [worker thread]
        speech start  -> open an ASR utterance stream, replay the onset
        speech audio  -> ASR
        speech stop   -> end the utterance (the final transcript follows)
    ASR partials      -> client; understanding of the partial runs ahead  [worker thread]
                         and picks the silence that ends this turn (adaptive end of turn)
    ASR final         -> understanding (usually ready already)
                      -> router: the LLM only for the ambiguities it settles    [agent/llm]
                      -> conversation: dialogue, policy, bank, or a streamed answer
                      -> reply phrases -> client (and the Speaker, for voice transports)
    every turn        -> turn.metrics event + a log line + Prometheus histograms

Transports (agent/server.py, agent/transports/) only translate: they call
:meth:`Call.feed_audio`, :meth:`Call.input_text`, :meth:`Call.cancel_response`,
:meth:`Call.finish` and :meth:`Call.close`, and send what the call puts in its
:class:`Outbox` (or speak it: agent/speaker.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent import metrics
from agent.asr.base import ASRError, CallContext, CallRecognizer, UtteranceStream
from agent.audio.endpointer import SpeechStarted, SpeechStopped
from agent.audio.frontend import FrontEnd, SpeechAudio
from agent.bank.directory import CustomerProfile
from agent.dialogue.conversation import Conversation
from agent.dialogue.replies import spoken_money
from agent.log import get_logger
from agent.services import Services
from agent.timing import CallClock, TurnTimings
from agent.understanding import Payee, Understanding
from protocol import events
from protocol.codecs import AudioDecoder
from protocol.events import ErrorCode, ProtocolError

log = get_logger("agent.pipeline")

_call_ids = itertools.count(1)

# Below this ASR confidence a partial does not choose the end-of-turn silence.
ADAPT_MIN_CONFIDENCE = 0.6


class SlowConsumer(Exception):
    """The client stopped reading: its outbox is full."""


class Outbox:
    """Events for one client, bounded: a client that stops reading cannot grow memory."""

    def __init__(self, maxsize: int) -> None:
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize)
        self.overflowed = asyncio.Event()
        # Called with every event, e.g. the speaker of a transport that also carries the
        # client's events (WebRTC beside the v1 socket). Must not block.
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    def put(self, event: dict[str, Any]) -> None:
        if event["type"] == "error":
            metrics.ERRORS.labels(event["code"]).inc()
        for listener in self.listeners:
            listener(event)
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed.set()
            raise SlowConsumer from None

    def close(self) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)

    async def get(self) -> dict[str, Any] | None:
        return await self._queue.get()


@dataclass(eq=False)  # identity: turns live in a set
class Turn:
    number: int
    timings: TurnTimings
    source: str  # "audio" or "text"
    utterance: UtteranceStream | None = None
    # Understanding (and end-of-turn completeness) of partials, by transcript text, so
    # the final's understanding is often ready when it arrives.
    ahead: dict[str, asyncio.Future[tuple[Understanding, str]]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    response_task: asyncio.Task[None] | None = None


class Call:
    def __init__(
        self,
        services: Services,
        session: events.SessionStart,
        profile: CustomerProfile | None,
        outbox: Outbox,
    ) -> None:
        self.id = f"call-{next(_call_ids)}"
        self.services = services
        self.session = session
        self.profile = profile
        self.outbox = outbox
        self.clock = CallClock()
        self.log = log.bind(call_id=self.id, customer_id=session.customer_id)
        assert services.bank is not None, "Services.build() makes the bank"
        # The dialogue: slot filling, confirmation, policy and the bank, for this caller.
        self.conversation = Conversation(
            services.bank,
            customer_id=session.customer_id,
            call_id=self.id,
            pending_ttl_s=services.config.bank.pending_ttl_s,
            answerer=services.router.answer if services.router else None,
        )
        self._payees = services.understander.payee_index(
            [Payee(p.id, p.name, p.kind) for p in (profile.payees if profile else ())]
        )
        self._decoder = AudioDecoder(session.codec, session.sample_rate)
        self._frontend = FrontEnd(services.vad, services.endpointer_config)
        self._audio: asyncio.Queue[tuple[bytes, float]] = asyncio.Queue(
            services.config.server.audio_queue_frames
        )
        self._samples_in = 0
        self._recognizer: CallRecognizer | None = None
        self._turn_numbers = itertools.count(1)
        self._open: Turn | None = None  # the turn whose audio is still arriving
        self._turns: set[Turn] = set()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    # --- called by the transport ------------------------------------------------------

    async def start(self) -> None:
        names = tuple(p.name for p in self.profile.payees) if self.profile else ()
        context = CallContext(call_id=self.id, phrases=names)
        self._recognizer = await self.services.recognizer.start_call(context)
        self._worker = asyncio.create_task(self._audio_worker(), name=f"{self.id}-audio")
        self.log.info("call_started", codec=self.session.codec, rate=self.session.sample_rate)

    async def feed_audio(self, frame: bytes) -> None:
        """Queue one binary frame; waits (back-pressure on the socket) when the queue is full."""
        limit = self.services.config.server.max_audio_frame_bytes
        if len(frame) > limit:
            raise ProtocolError(
                ErrorCode.FRAME_TOO_LARGE,
                f"audio frame of {len(frame)} bytes is over the {limit}-byte limit; "
                "send 20-100 ms per frame",
            )
        if self.session.codec == "pcm16" and len(frame) % 2:
            raise ProtocolError(
                ErrorCode.INVALID_AUDIO_FRAME,
                f"PCM16 frames hold whole 2-byte samples; got {len(frame)} bytes",
            )
        if frame:
            await self._audio.put((frame, self.clock.now()))

    async def finish(self) -> None:
        """session.end: process the audio already sent, close the open utterance and let
        the turns in flight complete, so nothing the caller said is lost."""
        await self._audio.join()
        for decision in self._frontend.flush():
            await self._speech_stopped(decision)
        pending = [t.task for t in self._turns if t.task]
        if pending:
            await asyncio.wait(pending)

    def input_text(self, text: str) -> None:
        """A typed turn: skips VAD and ASR, timed from the moment the text arrived."""
        turn = self._new_turn("text")
        turn.timings.mark("speech_end")
        turn.task = asyncio.create_task(self._text_turn(turn, text), name=f"{self.id}-text")

    def cancel_response(self) -> None:
        for turn in self._turns:
            if turn.response_task and not turn.response_task.done():
                turn.response_task.cancel()

    async def close(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        tasks = [t for t in (self._worker, *(turn.task for turn in self._turns)) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for turn in list(self._turns):
            if turn.utterance:
                await turn.utterance.aclose()
        if self._recognizer:
            await self._recognizer.aclose()
        self.log.info("call_ended", reason=reason)

    # --- audio ------------------------------------------------------------------------

    async def _audio_worker(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            frame, arrived = await self._audio.get()
            try:
                decisions = await loop.run_in_executor(
                    self.services.cpu_pool, self._decode_and_detect, frame
                )
                self.clock.audio_arrived(self._samples_in, arrived)
                for decision in decisions:
                    if isinstance(decision, SpeechStarted):
                        self._speech_started(decision)
                    elif isinstance(decision, SpeechAudio) and self._open:
                        await self._send_to_asr(self._open, decision)
                    elif isinstance(decision, SpeechStopped):
                        await self._speech_stopped(decision)
            except SlowConsumer:
                pass  # the transport closes the socket
            except Exception:
                self.log.exception("internal_error", where="audio")
                with contextlib.suppress(SlowConsumer):
                    self._emit(
                        events.error_event(ErrorCode.INTERNAL_ERROR, "audio processing failed")
                    )
            finally:
                self._audio.task_done()

    def _decode_and_detect(self, frame: bytes) -> list[Any]:
        samples = self._decoder.decode(frame)
        self._samples_in += len(samples)
        return self._frontend.process(samples)

    def _speech_started(self, event: SpeechStarted) -> None:
        assert self._recognizer is not None
        turn = self._new_turn("audio")
        turn.timings.mark("speech_start", self.clock.time_of_sample(event.start_sample))
        turn.utterance = self._recognizer.utterance()
        self._open = turn
        self._emit(events.speech_started_event(turn.number, event.start_sample))
        turn.task = asyncio.create_task(self._audio_turn(turn), name=f"{self.id}-turn")

    async def _send_to_asr(self, turn: Turn, audio: SpeechAudio) -> None:
        assert turn.utterance is not None
        try:
            await turn.utterance.send(audio.pcm16, audio.start_sample)
        except ASRError:
            pass  # the turn's task reports it when it reads the stream

    async def _speech_stopped(self, event: SpeechStopped) -> None:
        turn, self._open = self._open, None
        if turn is None or turn.utterance is None:
            return
        turn.timings.mark("speech_end", self.clock.time_of_sample(max(event.end_sample - 1, 0)))
        self._emit(events.speech_stopped_event(turn.number, event.end_sample))
        with contextlib.suppress(ASRError):
            await turn.utterance.end()

    # --- turns ------------------------------------------------------------------------

    def _new_turn(self, source: str) -> Turn:
        turn = Turn(next(self._turn_numbers), TurnTimings(self.clock), source)
        self._turns.add(turn)
        return turn

    async def _audio_turn(self, turn: Turn) -> None:
        assert turn.utterance is not None
        final_text = ""
        try:
            async for hypothesis in turn.utterance:
                if hypothesis.is_final:
                    turn.timings.mark("asr_final")
                    final_text = hypothesis.text
                    self._emit(
                        events.transcript_event(
                            turn.number, final_text, final=True, source=hypothesis.source
                        )
                    )
                    break
                turn.timings.mark("asr_first_partial")
                self._emit(
                    events.transcript_event(
                        turn.number, hypothesis.text, final=False, source=hypothesis.source
                    )
                )
                if self.services.config.pipeline.overlap:
                    self._understand_ahead(turn, hypothesis.text, hypothesis.confidence)
            if final_text.strip():
                await self._understand_and_reply(turn, final_text)
            self._finish_turn(turn)
        except ASRError as exc:
            self.log.warning("asr_failed", turn=turn.number, error=str(exc))
            self._emit(
                events.error_event(ErrorCode.ASR_UNAVAILABLE, f"speech recognition failed: {exc}")
            )
        except SlowConsumer:
            pass  # the transport closes the socket
        except Exception:
            self._internal_error("audio turn", turn)
        finally:
            for future in turn.ahead.values():
                future.cancel()
            await turn.utterance.aclose()
            self._turns.discard(turn)

    async def _text_turn(self, turn: Turn, text: str) -> None:
        try:
            self._emit(events.transcript_event(turn.number, text, final=True, source="text"))
            turn.timings.mark("asr_final")
            await self._understand_and_reply(turn, text)
            self._finish_turn(turn)
        except SlowConsumer:
            pass
        except Exception:
            self._internal_error("text turn", turn)
        finally:
            self._turns.discard(turn)

    def _understand_ahead(self, turn: Turn, text: str, confidence: float | None = None) -> None:
        """Understand a partial in a worker thread while the caller is still speaking;
        the final transcript usually equals the last partial, so its understanding is
        then ready at once. Older partials are stale: their queued jobs are cancelled."""
        if text in turn.ahead or not text.strip():
            return
        for stale in turn.ahead.values():
            stale.cancel()  # a queued job never runs; one already running is left alone
        adapt = turn is self._open and self.services.config.vad.adaptive
        job = functools.partial(self._understand_partial, text, adapt, confidence)
        future = asyncio.get_running_loop().run_in_executor(self.services.cpu_pool, job)
        future.add_done_callback(functools.partial(self._adapt_end_of_turn, turn))
        turn.ahead[text] = future

    def _understand_partial(
        self, text: str, adapt: bool, confidence: float | None
    ) -> tuple[Understanding, str]:
        understanding = self._understand(text)
        if not adapt:
            return understanding, "unknown"
        completeness = self.services.understander.completeness(text, understanding)
        # A partial the recogniser doubts says nothing about the end of the turn: espeak's
        # "what my ..." is not a caller stopping mid-sentence. Waiting longer needs a
        # confident partial; ending sooner needs at least no doubt.
        sure = confidence is not None and confidence >= ADAPT_MIN_CONFIDENCE
        doubted = confidence is not None and confidence < ADAPT_MIN_CONFIDENCE
        if doubted or (completeness == "incomplete" and not sure):
            completeness = "unknown"
        return understanding, completeness

    def _adapt_end_of_turn(self, turn: Turn, future: asyncio.Future[Any]) -> None:
        """Adaptive end of turn: a complete command may end after a short silence, a
        clearly unfinished one waits longer, anything else the default."""
        vad = self.services.config.vad
        if turn is not self._open or not vad.adaptive or future.cancelled() or future.exception():
            return
        _, completeness = future.result()
        silence = {"complete": vad.short_silence_ms, "incomplete": vad.long_silence_ms}
        self._frontend.endpointer.silence_ms = silence.get(completeness, vad.silence_ms)

    def _understand(self, text: str) -> Understanding:
        return self.services.understander.understand(
            text,
            payees=self._payees,
            now=datetime.now(),
            default_currency=self.profile.currency if self.profile else None,
        )

    async def _understand_and_reply(self, turn: Turn, text: str) -> None:
        ahead = turn.ahead.get(text)
        if ahead is not None and not ahead.cancelled():
            understanding, _ = await ahead
        else:
            loop = asyncio.get_running_loop()
            understanding = await loop.run_in_executor(
                self.services.cpu_pool, self._understand, text
            )
        turn.timings.mark("understanding_ready")
        # A task of its own so that response.cancel (barge-in) stops the reply, and the
        # LLM request in flight with it, but not the turn; asyncio.wait does not raise
        # when the reply is cancelled.
        turn.response_task = asyncio.create_task(self._reply(turn, understanding, text))
        try:
            await asyncio.wait({turn.response_task})
        finally:
            turn.response_task.cancel()

    async def _resolve(self, turn: Turn, understanding: Understanding, text: str) -> Understanding:
        """The fast path's reading, or, for the ambiguities it reports, the LLM's reading
        constrained to the real candidates (agent/llm/router.py decides which)."""
        router = self.services.router
        if router is None:
            return understanding
        names = {p.id: p for p in self.profile.payees} if self.profile else {}
        candidates = [
            Payee(payee.id, payee.name, payee.kind)
            for c in understanding.entities.get("recipient_candidates", [])
            if (payee := names.get(c["id"]))
        ]
        context = await self._account_context() if router.needs_llm(understanding) else None
        return await router.resolve(
            understanding,
            text=text,
            candidates=candidates,
            account_context=context,
            on_mark=turn.timings.mark,
        )

    async def _account_context(self) -> list[str]:
        """Recent history the LLM may use to tell candidates apart ("send the money to
        Ken" when last week's transfer went to Ken Sato). Read only when it is asked."""
        bank = self.services.bank
        if bank is None:
            return []
        recent = await asyncio.to_thread(
            bank.recent_transactions, self.session.customer_id, None, 10
        )
        return [
            f"{t.posted_at[:10]}: {t.description}, {spoken_money(t.amount_minor, t.currency)}"
            for t in recent
        ]

    async def _reply(self, turn: Turn, understanding: Understanding, text: str) -> None:
        spoken: list[str] = []
        try:
            understanding = await self._resolve(turn, understanding, text)
            metrics.UNDERSTOOD.labels(understanding.path, understanding.intent).inc()
            self._emit(events.understanding_event(turn.number, understanding.to_dict()))
            replies = self.conversation.respond(
                understanding, turn=turn.number, text=text, on_mark=turn.timings.mark
            )
            # aclosing: a cancelled reply closes the generator (and frees the
            # conversation, and an LLM stream) at once, not when garbage-collected.
            async with contextlib.aclosing(replies):
                async for phrase in replies:
                    turn.timings.mark("response_first_delta")
                    self._emit(events.response_delta_event(turn.number, phrase))
                    spoken.append(phrase)
                    await asyncio.sleep(0)  # let other calls' events out between phrases
        except asyncio.CancelledError:
            with contextlib.suppress(SlowConsumer):
                self._emit(
                    events.response_done_event(turn.number, "".join(spoken), status="cancelled")
                )
            raise
        turn.timings.mark("response_done")
        self._emit(events.response_done_event(turn.number, "".join(spoken)))

    def _finish_turn(self, turn: Turn) -> None:
        latencies = turn.timings.latencies_ms()
        self._emit(events.turn_metrics_event(turn.number, turn.timings.stages_ms(), latencies))
        for name, ms in latencies.items():
            metrics.STAGE_LATENCY.labels(name.removeprefix("speech_end_to_")).observe(ms / 1000)
        metrics.TURNS.labels(turn.source).inc()
        self.log.info("turn", turn=turn.number, input=turn.source, **latencies)

    def _internal_error(self, where: str, turn: Turn) -> None:
        self.log.exception("internal_error", where=where, turn=turn.number)
        with contextlib.suppress(SlowConsumer):
            self._emit(events.error_event(ErrorCode.INTERNAL_ERROR, f"turn {turn.number} failed"))

    def _emit(self, event: dict[str, Any]) -> None:
        self.outbox.put(event)
