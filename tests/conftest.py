"""Shared test fixtures: the real server in a child process, the speech fixtures."""

from __future__ import annotations

import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest

from clients.local_server import LocalServer

SPEECH = Path(__file__).parent / "fixtures" / "speech"


def load_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as wav:
        assert wav.getframerate() == 16_000 and wav.getnchannels() == 1
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")


def speech_fixtures() -> list[dict]:
    lines = (SPEECH / "transcripts.jsonl").read_text().splitlines()
    return [orjson.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="session")
def server() -> Iterator[LocalServer]:
    """One real server for the end-to-end tests that do not change its configuration."""
    with LocalServer() as running:
        yield running
