"""HTML report (placeholder until the plots land)."""

from __future__ import annotations

import html
from pathlib import Path

import orjson


def write_html(report: dict, path: Path) -> None:
    body = html.escape(orjson.dumps(report["summary"], option=orjson.OPT_INDENT_2).decode())
    path.write_text(f"<!doctype html><title>load test</title><pre>{body}</pre>\n")
