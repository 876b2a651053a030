"""python -m agent.understanding: JSON lines in, one JSON line out per input, in order.

in:  {"id": "...", "text": "...", "payees": [{"id": "p1", "name": "Ken Sato"}], "now": "..."}
out: {"id", "intent", "confidence", "topic", "entities", "needs_confirmation",
      "ambiguity_reason", "path", "trace"}; a bad line gives {"id", "error"} and the run goes on.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

import orjson

from agent.understanding.payees import Payee
from agent.understanding.understander import Understander


def _parse_now(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("now must be an ISO 8601 string")
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _payees(value: Any) -> list[Payee]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("payees must be a list")
    out = []
    for p in value:
        if not isinstance(p, dict) or "id" not in p or "name" not in p:
            raise ValueError("each payee needs id and name")
        out.append(Payee(str(p["id"]), str(p["name"]), str(p.get("kind", "person"))))
    return out


def handle_line(nlu: Understander, line: str, default_now: datetime | None) -> dict[str, Any]:
    ident: Any = None
    try:
        obj = orjson.loads(line)
        if not isinstance(obj, dict):
            raise ValueError("each line must be a JSON object")
        ident = obj.get("id")
        text = obj.get("text", "")
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        now = _parse_now(obj.get("now")) or default_now
        u = nlu.understand(
            text,
            payees=_payees(obj.get("payees")),
            now=now,
            default_currency=obj.get("default_currency"),
        )
    except (orjson.JSONDecodeError, ValueError, TypeError) as exc:
        return {"id": ident, "error": f"{type(exc).__name__}: {exc}"}
    return {"id": ident, **u.to_dict()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agent.understanding", description=__doc__)
    ap.add_argument("--now", help="reference time for every line (ISO 8601)")
    args = ap.parse_args(argv)
    default_now = _parse_now(args.now)
    nlu = Understander.load()
    out = sys.stdout.buffer
    for line in sys.stdin:
        if not line.strip():
            continue
        result = handle_line(nlu, line, default_now)
        out.write(orjson.dumps(result) + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
