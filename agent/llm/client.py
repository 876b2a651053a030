"""A streaming client for an OpenAI-compatible chat server: SGLang in production, the
embedded llama-server on a CPU. Plain HTTP (httpx); the ``sglang`` package (torch) is
never imported.

    client = LLMClient("http://127.0.0.1:30000", model="default")
    async with client.stream(messages, max_tokens=96, response_format=schema) as stream:
        async for delta in stream:         # text deltas as the server sends them
            ...
        stream.stats.cached_tokens         # the server's prefix-cache hit for this request
    await client.aclose()

Every request is streamed (the first token is the latency that matters) and carries a
client-chosen ``rid``. Leaving the ``async with`` early (barge-in, hang-up, a stale
partial, a timeout) cancels the request on the server: the response is closed, which
drops the connection (SGLang and llama-server both stop generating for a client that went
away), and ``POST /abort_request {"rid": ...}`` is sent as well, which SGLang honours even
while the request is still queued. A server that answers 404 there has no such endpoint
(llama-server); the client then stops trying and relies on closing the stream.

Timeouts: connecting, the first chunk and every gap between chunks are bounded
separately; the caller bounds the whole request with its own budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from agent.log import get_logger

log = get_logger("agent.llm.client")

_rids = itertools.count(1)
_RID_PREFIX = f"agent-{os.getpid():x}-{int(time.time()) & 0xFFFFFF:x}"


def new_rid(kind: str = "req") -> str:
    """A request id unique to this process: SGLang's abort endpoint finds requests by it."""
    return f"{_RID_PREFIX}-{kind}-{next(_rids)}"


class LLMError(Exception):
    """The LLM could not give an answer; callers degrade, never go silent."""

    code = "llm_error"


class LLMUnavailable(LLMError):
    code = "llm_unavailable"  # connection refused, reset, HTTP 5xx


class LLMTimeout(LLMError):
    code = "llm_timeout"  # connect, first token or inter-chunk gap too long


class LLMBadResponse(LLMError):
    code = "llm_bad_response"  # HTTP 4xx or a stream that is not OpenAI-shaped


@dataclass
class StreamStats:
    """What one request cost, from the client's clock and the server's own report."""

    rid: str
    started: float  # time.perf_counter() when the request was sent
    first_token_at: float | None = None
    done_at: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # prompt tokens served from the prefix cache
    finish_reason: str | None = None
    chunks: int = 0
    server_timings: dict[str, Any] = field(default_factory=dict)  # llama-server "timings"
    cancelled: bool = False

    @property
    def ttft_ms(self) -> float | None:
        if self.first_token_at is None:
            return None
        return (self.first_token_at - self.started) * 1000

    @property
    def total_ms(self) -> float | None:
        if self.done_at is None:
            return None
        return (self.done_at - self.started) * 1000

    @property
    def tpot_ms(self) -> float | None:
        """Time per output token after the first (decode speed as the caller sees it)."""
        n = self.completion_tokens or self.chunks
        if self.first_token_at is None or self.done_at is None or n is None or n < 2:
            return None
        return (self.done_at - self.first_token_at) * 1000 / (n - 1)

    def to_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 1)

        return {
            "rid": self.rid,
            "ttft_ms": r(self.ttft_ms),
            "total_ms": r(self.total_ms),
            "tpot_ms": r(self.tpot_ms),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "finish_reason": self.finish_reason,
            "cancelled": self.cancelled,
        }


@dataclass
class Completion:
    text: str
    stats: StreamStats


class ChatStream:
    """One streamed chat completion. Iterate for text deltas; leave the ``async with``
    (or call :meth:`cancel`) to stop it, on the server too."""

    def __init__(self, client: LLMClient, body: dict[str, Any], rid: str) -> None:
        self._client = client
        self._body = body
        self.rid = rid
        self.stats = StreamStats(rid=rid, started=time.perf_counter())
        self._response: httpx.Response | None = None
        self._finished = False

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cancel()

    async def _open(self) -> httpx.Response:
        client = self._client
        request = client.http.build_request(
            "POST", "/v1/chat/completions", content=orjson.dumps(self._body)
        )
        self.stats.started = time.perf_counter()
        try:
            async with asyncio.timeout(client.first_token_timeout_s):
                response = await client.http.send(request, stream=True)
        except TimeoutError:
            raise LLMTimeout(
                f"no response headers within {client.first_token_timeout_s}s"
            ) from None
        except httpx.TimeoutException as exc:
            raise LLMTimeout(f"{type(exc).__name__}: {exc}") from None
        except httpx.HTTPError as exc:
            raise LLMUnavailable(f"{type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            detail = (await response.aread())[:300].decode("utf-8", "replace")
            await response.aclose()
            kind = LLMUnavailable if response.status_code >= 500 else LLMBadResponse
            raise kind(f"HTTP {response.status_code}: {detail}")
        return response

    async def __aiter__(self) -> AsyncIterator[str]:
        client = self._client
        self._response = response = await self._open()
        lines = response.aiter_lines()
        waited = client.first_token_timeout_s - (time.perf_counter() - self.stats.started)
        try:
            while True:
                limit = (
                    client.idle_timeout_s
                    if self.stats.first_token_at is not None
                    else max(waited, 0.001)
                )
                try:
                    async with asyncio.timeout(limit):
                        line = await anext(lines)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    what = "first token" if self.stats.first_token_at is None else "next chunk"
                    raise LLMTimeout(f"no {what} within {limit:.2f}s") from None
                except httpx.HTTPError as exc:
                    raise LLMUnavailable(f"stream broke: {type(exc).__name__}: {exc}") from None
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = orjson.loads(data)
                except orjson.JSONDecodeError:
                    raise LLMBadResponse(f"not JSON in the stream: {data[:120]!r}") from None
                if "error" in chunk:
                    raise LLMBadResponse(f"server error in stream: {chunk['error']}")
                delta = self._take(chunk)
                if delta:
                    if self.stats.first_token_at is None:
                        self.stats.first_token_at = time.perf_counter()
                    self.stats.chunks += 1
                    yield delta
            self._finished = True
            self.stats.done_at = time.perf_counter()
            if self.stats.first_token_at is None:
                self.stats.first_token_at = self.stats.done_at
        finally:
            if not self._finished:
                await self.cancel()

    def _take(self, chunk: Mapping[str, Any]) -> str:
        """The text delta of one chunk; usage and timings are kept in stats."""
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self.stats.prompt_tokens = usage.get("prompt_tokens", self.stats.prompt_tokens)
            self.stats.completion_tokens = usage.get(
                "completion_tokens", self.stats.completion_tokens
            )
            details = usage.get("prompt_tokens_details")
            if isinstance(details, Mapping) and details.get("cached_tokens") is not None:
                self.stats.cached_tokens = int(details["cached_tokens"])
        timings = chunk.get("timings")
        if isinstance(timings, Mapping):  # llama-server: cache_n = prompt tokens reused
            self.stats.server_timings = dict(timings)
            if timings.get("cache_n") is not None and self.stats.cached_tokens is None:
                self.stats.cached_tokens = int(timings["cache_n"])
        text = []
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self.stats.finish_reason = choice["finish_reason"]
            content = (choice.get("delta") or {}).get("content")
            if content:
                text.append(content)
        return "".join(text)

    async def cancel(self) -> None:
        """Stop the request: close the connection and ask the server to abort the rid."""
        response, self._response = self._response, None
        if self._finished:
            if response is not None:
                await response.aclose()
            return
        self._finished = True
        self.stats.cancelled = True
        self.stats.done_at = time.perf_counter()
        if response is not None:
            with contextlib.suppress(Exception):
                await response.aclose()
        self._client.abort_in_background(self.rid)

    async def complete(self) -> Completion:
        parts = [delta async for delta in self]
        return Completion("".join(parts), self.stats)


class LLMClient:
    """Pooled HTTP/1.1 connections to one OpenAI-compatible server."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "default",
        api_key: str = "",
        connect_timeout_s: float = 1.0,
        first_token_timeout_s: float = 2.5,
        idle_timeout_s: float = 2.0,
        max_connections: int = 64,
        abort_endpoint: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.first_token_timeout_s = first_token_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.abort_supported = abort_endpoint  # None after a 404: the server has no endpoint
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self.http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(connect=connect_timeout_s, read=None, write=5.0, pool=1.0),
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=60.0,
            ),
            transport=transport,
        )
        self._aborts: set[asyncio.Task[None]] = set()

    def request_body(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        response_format: Mapping[str, Any] | None = None,
        rid: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": max_tokens,
            "temperature": temperature,
            "rid": rid or new_rid(),
        }
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = self.chat_template_kwargs
        if response_format is not None:
            body["response_format"] = dict(response_format)
        if extra:
            body.update(extra)
        return body

    def stream(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        response_format: Mapping[str, Any] | None = None,
        rid: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ChatStream:
        body = self.request_body(
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            response_format=response_format,
            rid=rid,
            extra=extra,
        )
        return ChatStream(self, body, body["rid"])

    async def complete(self, messages: Sequence[Mapping[str, str]], **kwargs: Any) -> Completion:
        async with self.stream(messages, **kwargs) as stream:
            return await stream.complete()

    # --- cancel on the server -----------------------------------------------------------

    def abort_in_background(self, rid: str) -> None:
        """Send the abort without making the canceller wait (it may itself be cancelled)."""
        if not self.abort_supported or self.http.is_closed:
            return
        task = asyncio.get_running_loop().create_task(self.abort(rid))
        self._aborts.add(task)
        task.add_done_callback(self._aborts.discard)

    async def abort(self, rid: str) -> bool:
        """POST /abort_request {"rid": rid}; False where the server has no such endpoint."""
        if not self.abort_supported:
            return False
        try:
            response = await self.http.post(
                "/abort_request", content=orjson.dumps({"rid": rid}), timeout=1.0
            )
        except httpx.HTTPError as exc:
            log.debug("llm_abort_failed", rid=rid, error=str(exc))
            return False
        if response.status_code in (404, 405):
            log.info("llm_abort_unsupported", status=response.status_code)
            self.abort_supported = False  # closing the stream is then the only cancel
            return False
        return response.status_code == 200

    async def healthy(self) -> bool:
        try:
            response = await self.http.get("/health", timeout=1.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def aclose(self) -> None:
        if self._aborts:
            await asyncio.gather(*self._aborts, return_exceptions=True)
        await self.http.aclose()
