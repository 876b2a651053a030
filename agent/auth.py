"""Session tokens: who the caller is, signed by the bank's front end.

A token is ``v1.<payload>.<signature>``: the payload is base64url JSON
``{"sub": customer id, "exp": unix seconds}`` and the signature base64url
HMAC-SHA256 over ``v1.<payload>`` with the secret from ``[auth] secret``. The server
takes the session's customer from a valid token and from nowhere else.

    token = mint("cust-001", secret, ttl_s=3600)
    claims = verify(token, secret)        # raises InvalidToken
    claims.customer_id

``python -m agent token --customer cust-001`` prints one with the configured secret.
Pure functions; the clock is a parameter.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass

import orjson

from agent.bank.directory import CustomerProfile, customer_profile

VERSION = "v1"
MAX_TOKEN_CHARS = 4096


class InvalidToken(ValueError):
    """The token is missing, malformed, forged or expired (the message says which)."""


@dataclass(frozen=True, slots=True)
class Claims:
    customer_id: str
    expires_at: int  # unix seconds


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(message: str, secret: str) -> str:
    return _b64(hmac.new(secret.encode(), message.encode(), hashlib.sha256).digest())


def mint(customer_id: str, secret: str, *, ttl_s: float, now: float | None = None) -> str:
    if not secret:
        raise ValueError("an empty secret signs nothing")
    expires = int((time.time() if now is None else now) + ttl_s)
    payload = _b64(orjson.dumps({"sub": customer_id, "exp": expires}))
    body = f"{VERSION}.{payload}"
    return f"{body}.{_sign(body, secret)}"


def verify(token: str | None, secret: str, *, now: float | None = None) -> Claims:
    if not token:
        raise InvalidToken("no session token")
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidToken("the session token is too long")
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        raise InvalidToken("the session token is malformed")
    body = f"{parts[0]}.{parts[1]}"
    if not hmac.compare_digest(_sign(body, secret), parts[2]):
        raise InvalidToken("the session token's signature is not valid")
    try:
        claims = orjson.loads(_unb64(parts[1]))
        customer_id, expires = claims["sub"], claims["exp"]
    except (ValueError, KeyError, TypeError):
        raise InvalidToken("the session token is malformed") from None
    if not isinstance(customer_id, str) or not customer_id or not isinstance(expires, int):
        raise InvalidToken("the session token is malformed")
    if expires <= (time.time() if now is None else now):
        raise InvalidToken("the session token has expired")
    return Claims(customer_id, expires)


def identify(token: str | None, claimed_customer_id: str | None, secret: str) -> CustomerProfile:
    """The caller of a session, whatever the transport: whoever the signed token names.
    A customer id the client also states is accepted only when it agrees."""
    claims = verify(token, secret)
    if claimed_customer_id and claimed_customer_id != claims.customer_id:
        raise InvalidToken("the session token is for another customer")
    profile = customer_profile(claims.customer_id)
    if profile is None:
        raise InvalidToken("the session token names an unknown customer")
    return profile
