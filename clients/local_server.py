"""Start the agent server as a child process on a free loopback port.

Used by the demo, the tests and the load-test bots: the server under test is always
the real one, started the way a user starts it (``python -m agent serve``).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

import orjson

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class LocalServer:
    def __init__(
        self, *flags: str, env: dict[str, str] | None = None, startup_timeout_s: float = 120.0
    ) -> None:
        # Each server gets a bank of its own (a fresh seed in a temporary folder) unless
        # told otherwise, so no run inherits another's locks, limits or pending questions.
        self._bank_dir: tempfile.TemporaryDirectory[str] | None = None
        if "--bank.path" not in flags:
            self._bank_dir = tempfile.TemporaryDirectory(prefix="agent-bank-")
            flags = (*flags, "--bank.path", str(Path(self._bank_dir.name) / "bank.sqlite3"))
        self.flags = ("--server.host", "127.0.0.1", "--server.port", "0", *flags)
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
        self.startup_timeout_s = startup_timeout_s
        self.url = ""
        self.port = 0
        self.logs: list[dict] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> LocalServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agent", "serve", *self.flags],
            cwd=PROJECT_ROOT,
            env=self.env,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            if line is None:
                break
            record = _parse(line)
            if record.get("event") == "server_listening":
                self.url, self.port = record["url"], record["port"]
                return self
        self.stop()
        raise RuntimeError("the agent server did not start:\n" + self.log_text())

    def events(self, name: str) -> list[dict]:
        """Log records with this structlog event name."""
        return [r for r in list(self.logs) if r.get("event") == name]

    def _pump(self) -> None:
        assert self.process and self.process.stderr
        for line in self.process.stderr:
            self.logs.append(_parse(line))
            self._lines.put(line)
        self._lines.put(None)

    def log_text(self) -> str:
        return "\n".join(orjson.dumps(r).decode() for r in self.logs)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> int | None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._bank_dir is not None:
            self._bank_dir.cleanup()
            self._bank_dir = None
        return self.process.returncode if self.process else None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()


def _parse(line: str) -> dict:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        record = None
    return record if isinstance(record, dict) else {"event": "stderr", "text": line.rstrip()}
