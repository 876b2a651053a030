"""Session tokens: minting and verification (fast), and the server's refusal (slow)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from agent import auth
from agent.config import load_config
from clients.call import run_call
from clients.local_server import PROJECT_ROOT, LocalServer

SECRET = "test-secret"
NOW = 1_800_000_000.0


def test_a_minted_token_verifies() -> None:
    token = auth.mint("cust-001", SECRET, ttl_s=60, now=NOW)
    claims = auth.verify(token, SECRET, now=NOW + 59)
    assert claims == auth.Claims("cust-001", int(NOW + 60))


@pytest.mark.parametrize(
    ("token", "secret", "now", "message"),
    [
        (None, SECRET, NOW, "no session token"),
        ("", SECRET, NOW, "no session token"),
        ("garbage", SECRET, NOW, "malformed"),
        ("v2.e30.sig", SECRET, NOW, "malformed"),
        (auth.mint("cust-001", SECRET, ttl_s=60, now=NOW), "other-secret", NOW, "signature"),
        (auth.mint("cust-001", SECRET, ttl_s=60, now=NOW), SECRET, NOW + 60, "expired"),
        ("x" * 5000, SECRET, NOW, "too long"),
    ],
)
def test_bad_tokens_are_refused(token: str | None, secret: str, now: float, message: str) -> None:
    with pytest.raises(auth.InvalidToken, match=message):
        auth.verify(token, secret, now=now)


def test_a_tampered_payload_breaks_the_signature() -> None:
    token = auth.mint("cust-001", SECRET, ttl_s=60, now=NOW)
    other = auth.mint("cust-002", SECRET, ttl_s=60, now=NOW)
    forged = ".".join([*other.split(".")[:2], token.split(".")[2]])
    with pytest.raises(auth.InvalidToken, match="signature"):
        auth.verify(forged, SECRET, now=NOW)


def test_the_token_command_prints_a_token_for_the_configured_secret() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent", "token", "--customer", "cust-002", "--ttl", "120"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    claims = auth.verify(done.stdout.strip(), load_config().auth.secret)
    assert claims.customer_id == "cust-002"


async def start_session(url: str, customer_id: str, token: str) -> tuple[list[dict], int | None]:
    """session.start then a typed turn; the events received and the close code."""
    events: list[dict] = []
    async with connect(url) as ws:
        start = {"type": "session.start", "customer_id": customer_id, "token": token or None}
        await ws.send(orjson.dumps(start).decode())
        try:
            await ws.send(orjson.dumps({"type": "input_text", "text": "yes"}).decode())
            async for message in ws:
                events.append(orjson.loads(message))
        except ConnectionClosed:
            pass
        return events, ws.close_code


@pytest.mark.slow
async def test_the_server_takes_the_customer_from_the_token_only(tmp_path) -> None:
    secret = "server-side-secret"
    with LocalServer(
        "--bank.path", str(tmp_path / "bank.sqlite3"), "--auth.secret", secret
    ) as server:
        good = auth.mint("cust-002", secret, ttl_s=60)
        result = await run_call(
            server.url, texts=("what's my balance",), customer_id="cust-002", token=good
        )
        assert result.closed_cleanly
        assert "830,000 yen" in result.replies()[0]  # Haruka's account, not the default caller's

        cases = {
            "missing": ("cust-001", ""),
            "forged": ("cust-001", auth.mint("cust-001", "wrong-secret", ttl_s=60)),
            "expired": ("cust-001", auth.mint("cust-001", secret, ttl_s=-1)),
            "someone else's": ("cust-001", good),  # customer_id says 001, token says 002
            "unknown customer": ("cust-999", auth.mint("cust-999", secret, ttl_s=60)),
        }
        for name, (customer, token) in cases.items():
            events, close_code = await start_session(server.url, customer, token)
            assert [e["type"] for e in events] == ["error"], (name, events)
            assert events[0]["code"] == "unauthorized", name
            assert close_code == 1008, name
        # the server's log lines arrive through a pipe: give the last one a moment
        for _ in range(50):
            if len(server.events("unauthorized")) == len(cases):
                break
            await asyncio.sleep(0.1)
        assert len(server.events("unauthorized")) == len(cases)
