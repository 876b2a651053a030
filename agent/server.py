"""The WebSocket transport: protocol v1 over websockets' asyncio server.

One connection is one call. This module only translates: text messages become typed
client events (protocol.events), binary messages become audio frames, and the call's
outbox is drained to the socket by a sender task. HTTP GETs on the same port serve
``/healthz``, ``/metrics`` and the browser call widget (``/``, ``/web/<file>``); a
``webrtc.offer`` moves the call's audio to WebRTC (agent/transports/webrtc.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import ipaddress
import re
import signal
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response

from agent import auth, metrics
from agent.config import PROJECT_ROOT, Config
from agent.log import get_logger
from agent.pipeline import Call, Outbox, SlowConsumer
from agent.services import Services
from agent.transports import webrtc
from agent.transports.twilio import serve_twilio
from protocol import events
from protocol.events import ErrorCode, ProtocolError

log = get_logger("agent.server")

# How long session.end waits for the turns in flight before closing.
DRAIN_TIMEOUT_S = 15.0

# The browser call widget: GET / is its page, GET /web/<file> the rest (one flat folder).
WEB_ROOT = PROJECT_ROOT / "clients" / "web"
WEB_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
WEB_FILE = re.compile(r"[A-Za-z0-9_-]+\.[a-z]+")  # no slashes, no "..": no traversal


class AgentServer:
    def __init__(self, config: Config, services: Services) -> None:
        self.config = config
        self.services = services
        self.active_calls = 0
        self._server: Server | None = None

    async def start(self) -> tuple[str, int]:
        cfg = self.config.server
        self._server = await serve(
            self._handle,
            cfg.host,
            cfg.port,
            process_request=self._http,
            max_size=cfg.max_message_bytes,
            ping_interval=cfg.ping_interval_s,
            ping_timeout=cfg.ping_interval_s,
            compression=None,  # audio does not compress; deflate only costs CPU
        )
        host, port = next(iter(self._server.sockets)).getsockname()[:2]
        log.info("server_listening", url=f"ws://{host}:{port}", host=host, port=port)
        return host, port

    async def serve_forever(self) -> None:
        assert self._server is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._server.close)
        await self._server.wait_closed()
        log.info("server_stopped")

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path == "/healthz":
            body = b'{"status":"ok","active_calls":%d}' % self.active_calls
            return _response(http.HTTPStatus.OK, body, "application/json")
        if request.path == "/metrics":
            return _response(http.HTTPStatus.OK, metrics.render(), "text/plain; version=0.0.4")
        if request.headers.get("Upgrade", "").lower() != "websocket":
            target = urlsplit(request.path)
            if target.path == "/dev/token":
                return self._dev_token(connection, target.query)
            return _web_file(target.path)
        return None

    def _dev_token(self, connection: ServerConnection, query: str) -> Response:
        """Development only (auth.dev_tokens): a session token for the widget's demo
        login, handed to clients on this machine's loopback and nobody else."""
        from agent.bank.directory import customer_profile

        if not self.config.auth.dev_tokens:
            return _response(http.HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        if not ipaddress.ip_address(connection.remote_address[0]).is_loopback:
            return _response(http.HTTPStatus.FORBIDDEN, b"loopback clients only\n", "text/plain")
        customer = parse_qs(query).get("customer", [""])[0]
        if len(customer) > 64 or customer_profile(customer) is None:
            return _response(http.HTTPStatus.NOT_FOUND, b"unknown customer\n", "text/plain")
        ttl = self.config.auth.token_ttl_s
        token = auth.mint(customer, self.config.auth.secret, ttl_s=ttl)
        body = events.encode({"customer_id": customer, "token": token, "expires_in_s": ttl})
        return _response(http.HTTPStatus.OK, body, "application/json")

    async def _handle(self, ws: ServerConnection) -> None:
        if self.active_calls >= self.config.server.max_calls:
            metrics.REFUSED.inc()
            await _send_now(
                ws,
                events.error_event(
                    ErrorCode.SERVER_BUSY,
                    f"the server is at its limit of {self.config.server.max_calls} calls; "
                    "try again shortly",
                ),
            )
            await ws.close(CloseCode.TRY_AGAIN_LATER, "server busy")
            return
        self.active_calls += 1
        metrics.ACTIVE_CALLS.inc()
        try:
            if ws.request is not None and ws.request.path.startswith("/twilio"):
                await serve_twilio(ws, self.services)
            else:
                await self._call(ws)
        finally:
            self.active_calls -= 1
            metrics.ACTIVE_CALLS.dec()

    async def _call(self, ws: ServerConnection) -> None:
        session = await self._await_session_start(ws)
        if session is None:
            return
        try:
            profile = auth.identify(session.token, session.customer_id, self.config.auth.secret)
        except auth.InvalidToken as exc:
            log.warning("unauthorized", error=str(exc))
            await _send_error(ws, ProtocolError(ErrorCode.UNAUTHORIZED, str(exc)))
            await ws.close(CloseCode.POLICY_VIOLATION, "unauthorized")
            return
        outbox = Outbox(self.config.server.outbox_events)
        call = Call(self.services, session, profile, outbox)
        metrics.CALLS.inc()
        sender = asyncio.create_task(_send_loop(ws, outbox))
        watchdog = asyncio.create_task(_close_when_overflowed(ws, outbox))
        reason = "client_closed"
        try:
            await call.start()
            outbox.put(
                events.session_created_event(
                    call.id, sample_rate=session.sample_rate, codec=session.codec
                )
            )
            reason = await self._read_loop(ws, call, outbox)
        except ConnectionClosed:
            reason = "disconnected"
        except SlowConsumer:
            reason = "slow_consumer"
        finally:
            await call.close(reason)
            if reason == "session_end":
                with contextlib.suppress(Exception):
                    outbox.put(events.session_ended_event(reason))
            outbox.close()
            watchdog.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(sender, timeout=5)
            sender.cancel()
            if reason == "slow_consumer":
                log.warning("client_not_reading", call_id=call.id)
            await ws.close()

    async def _await_session_start(self, ws: ServerConnection) -> events.SessionStart | None:
        """Read until a valid session.start; everything before it gets an error."""
        deadline = self.config.server.session_start_timeout_s
        try:
            async with asyncio.timeout(deadline):
                async for message in ws:
                    try:
                        if isinstance(message, bytes):
                            raise ProtocolError(
                                ErrorCode.SESSION_NOT_STARTED,
                                "audio arrived before session.start; it was dropped",
                            )
                        event = events.parse_client_event(message)
                        if isinstance(event, events.SessionStart):
                            return event
                        if isinstance(event, events.SessionEnd):
                            return None
                        raise ProtocolError(
                            ErrorCode.SESSION_NOT_STARTED,
                            "send session.start before any other event",
                        )
                    except ProtocolError as exc:
                        await _send_error(ws, exc)
        except TimeoutError:
            await _send_error(
                ws,
                ProtocolError(
                    ErrorCode.SESSION_NOT_STARTED, f"no session.start within {deadline:g} s"
                ),
            )
            await ws.close(CloseCode.POLICY_VIOLATION, "no session.start")
        except ConnectionClosed:
            pass
        return None

    async def _read_loop(self, ws: ServerConnection, call: Call, outbox: Outbox) -> str:
        async for message in ws:
            if outbox.overflowed.is_set():
                return "slow_consumer"
            try:
                if isinstance(message, bytes):
                    await call.feed_audio(message)
                    continue
                event = events.parse_client_event(message)
                if isinstance(event, events.InputText):
                    call.input_text(event.text)
                elif isinstance(event, events.ResponseCancel):
                    call.cancel_response()
                elif isinstance(event, events.WebRTCOffer):
                    await webrtc.handle_offer(ws, call, self.services, event.sdp)
                elif isinstance(event, events.SessionEnd):
                    try:
                        async with asyncio.timeout(DRAIN_TIMEOUT_S):
                            await call.finish()
                    except TimeoutError:
                        log.warning("finish_timed_out", call_id=call.id)
                    return "session_end"
                else:
                    raise ProtocolError(
                        ErrorCode.SESSION_ALREADY_STARTED, "this session has already started"
                    )
            except ProtocolError as exc:
                log.info("client_error", call_id=call.id, code=str(exc.code), error=exc.message)
                outbox.put(events.error_event(exc.code, exc.message))
            except (ConnectionClosed, SlowConsumer):
                raise
            except Exception:
                log.exception("internal_error", call_id=call.id)
                outbox.put(events.error_event(ErrorCode.INTERNAL_ERROR, "the server failed"))
        return "slow_consumer" if outbox.overflowed.is_set() else "client_closed"


def _response(status: http.HTTPStatus, body: bytes, content_type: str) -> Response:
    # websockets closes the connection after any response but 101; saying so stops
    # keep-alive clients (browsers, httpx) from sending the next request into the close.
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)


def _web_file(path: str) -> Response:
    name = "index.html" if path == "/" else path.removeprefix("/web/")
    file = WEB_ROOT / name
    kind = WEB_TYPES.get(file.suffix)
    if name == path or not WEB_FILE.fullmatch(name) or kind is None or not file.is_file():
        return _response(http.HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
    response = _response(http.HTTPStatus.OK, file.read_bytes(), kind)  # a few KB
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


async def _send_now(ws: ServerConnection, event: dict) -> None:
    with contextlib.suppress(ConnectionClosed):
        await ws.send(events.encode(event), text=True)


async def _send_error(ws: ServerConnection, exc: ProtocolError) -> None:
    metrics.ERRORS.labels(str(exc.code)).inc()
    log.info("client_error", code=str(exc.code), error=exc.message)
    await _send_now(ws, events.error_event(exc.code, exc.message))


async def _send_loop(ws: ServerConnection, outbox: Outbox) -> None:
    with contextlib.suppress(ConnectionClosed):
        while (event := await outbox.get()) is not None:
            await ws.send(events.encode(event), text=True)


async def _close_when_overflowed(ws: ServerConnection, outbox: Outbox) -> None:
    """A client that stops reading is cut off: its events would pile up without bound."""
    await outbox.overflowed.wait()
    await ws.close(CloseCode.POLICY_VIOLATION, "slow_consumer: client is not reading events")


async def run(config: Config) -> None:
    services = await Services.build(config)
    server = AgentServer(config, services)
    try:
        await server.start()
        await server.serve_forever()
    finally:
        await services.aclose()
