"""Configuration: typed sections, a TOML file, environment overrides, CLI flags.

Precedence, lowest first: the defaults below, the TOML file (``configs/agent.toml`` by
default), environment variables ``AGENT_<SECTION>_<KEY>`` (e.g. ``AGENT_SERVER_PORT=9000``),
then ``serve`` command-line flags ``--section.key``. Every field carries its help text,
which ``python -m agent serve --help`` prints with its environment variable.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from agent.llm.config import LLMConfig
from agent.paths import PROJECT_ROOT

DEFAULT_CONFIG_PATH = PROJECT_ROOT / "configs" / "agent.toml"


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class ServerConfig:
    host: str = _opt("127.0.0.1", "address to listen on")
    port: int = _opt(8765, "TCP port for WebSocket calls, /healthz and /metrics")
    max_calls: int = _opt(32, "concurrent calls accepted; more are refused with server_busy")
    max_message_bytes: int = _opt(
        1_048_576, "largest WebSocket message; larger ones close the socket with 1009"
    )
    max_audio_frame_bytes: int = _opt(
        65_536, "largest audio frame accepted (about 2 s of 16 kHz PCM16); larger: error"
    )
    session_start_timeout_s: float = _opt(10.0, "time a client has to send session.start")
    outbox_events: int = _opt(
        512, "events queued for a client that is not reading before it is dropped"
    )
    audio_queue_frames: int = _opt(
        256, "audio frames buffered per call before reading from the socket pauses"
    )
    ping_interval_s: float = _opt(10.0, "WebSocket ping interval that detects vanished clients")
    cpu_workers: int = _opt(4, "threads for CPU-bound audio work (VAD) shared by all calls")


@dataclass(frozen=True)
class VADConfig:
    threshold: float = _opt(0.5, "speech probability at which speech starts (Silero VAD)")
    silence_ms: int = _opt(600, "silence that ends a turn when the partial is not decisive")
    short_silence_ms: int = _opt(
        300, "silence that ends a turn whose partial is already a complete command"
    )
    long_silence_ms: int = _opt(
        1000, "silence that ends a turn whose partial is clearly unfinished"
    )
    adaptive: bool = _opt(True, "choose the silence from the partial's completeness")
    min_speech_ms: int = _opt(90, "speech needed before a turn is considered started")
    speech_pad_ms: int = _opt(60, "audio kept before the detected speech start")
    max_utterance_s: float = _opt(30.0, "longest turn; speech beyond it is cut into a new turn")


@dataclass(frozen=True)
class ASRConfig:
    backend: str = _opt("embedded", "speech recogniser: 'embedded' (CPU, offline) or 'riva'")
    whisper_confirm: str = _opt(
        "auto", "embedded: run Whisper after the domain decoder: 'auto', 'always' or 'never'"
    )
    partial_interval_ms: int = _opt(200, "embedded: audio between partial transcripts")
    whisper_threads: int = _opt(2, "embedded: CPU threads for the Whisper decoder")
    riva_uri: str = _opt("localhost:50051", "riva: gRPC address of the Riva server")
    riva_use_ssl: bool = _opt(False, "riva: use TLS to reach the Riva server")
    riva_language: str = _opt("en-US", "riva: language code")
    riva_boost_score: float = _opt(20.0, "riva: word-boost score for the caller's payee names")
    riva_timeout_s: float = _opt(
        60.0, "riva: deadline for one utterance's stream; keep it above vad.max_utterance_s"
    )


@dataclass(frozen=True)
class TTSConfig:
    backend: str = _opt(
        "piper", "voice for spoken replies: 'piper' (CPU, offline), 'riva', or 'none'"
    )
    lead_ms: int = _opt(
        300, "audio sent ahead of real time; a barge-in cannot take back more than this"
    )
    piper_threads: int = _opt(2, "piper: concurrent phrase syntheses across all calls")
    riva_uri: str = _opt("localhost:50051", "riva: gRPC address of the Riva TTS server")
    riva_voice: str = _opt("", "riva: voice name (empty: the server's default)")
    riva_language: str = _opt("en-US", "riva: language code")


@dataclass(frozen=True)
class PipelineConfig:
    overlap: bool = _opt(
        True,
        "understand ASR partials while the caller speaks; false is the sequential baseline "
        "(understanding only after the final transcript, so no adaptive end of turn)",
    )


@dataclass(frozen=True)
class LogConfig:
    level: str = _opt("info", "log level: debug, info, warning, error")


@dataclass(frozen=True)
class BankConfig:
    path: str = _opt(
        "var/bank.sqlite3",
        "embedded bank: SQLite database file (relative to the project root); created and "
        "seeded from agent/bank/seed.json on first start",
    )
    pending_ttl_s: float = _opt(
        120.0,
        "how long an action read back to the caller stays confirmable, also from a new "
        "connection of the same customer after a dropped call",
    )


@dataclass(frozen=True)
class AuthConfig:
    secret: str = _opt(
        "dev-only-secret-replace-me",
        "HMAC-SHA256 key that signs session tokens; the default is for development only: "
        "set your own (env AGENT_AUTH_SECRET) anywhere real",
    )
    token_ttl_s: float = _opt(3600.0, "lifetime of a token minted by 'python -m agent token'")
    dev_tokens: bool = _opt(
        False,
        "development only: GET /dev/token?customer=ID mints a session token for any customer "
        "(the browser widget's demo login); answered to loopback clients only",
    )


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    vad: VADConfig = field(default_factory=VADConfig)
    asr: ASRConfig = field(default_factory=ASRConfig)
    tts: TTSConfig = field(default_factory=TTSConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    log: LogConfig = field(default_factory=LogConfig)
    bank: BankConfig = field(default_factory=BankConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)


class ConfigError(ValueError):
    pass


def _sections() -> dict[str, type]:
    hints = get_type_hints(Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(Config)}


def _coerce(value: Any, kind: type, where: str) -> Any:
    if isinstance(value, str) and kind is not str:
        text = value.strip().lower()
        if kind is bool:
            if text not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                raise ConfigError(f"{where}: expected a boolean, got {value!r}")
            return text in {"1", "true", "yes", "on"}
        try:
            return kind(text)
        except ValueError:
            raise ConfigError(f"{where}: expected {kind.__name__}, got {value!r}") from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {kind.__name__}, got {value!r}")
    return value


def options() -> list[tuple[str, str, type, Any, str]]:
    """(section, key, type, default, help) for every option: the source of --help."""
    rows = []
    for section, cls in _sections().items():
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            rows.append((section, f.name, hints[f.name], f.default, f.metadata["help"]))
    return rows


def env_name(section: str, key: str) -> str:
    return f"AGENT_{section}_{key}".upper()


def load_config(
    path: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Defaults <- TOML file <- environment <- overrides (``{"server.port": 9000}``)."""
    environ = os.environ if environ is None else environ
    path = path or Path(environ.get("AGENT_CONFIG", DEFAULT_CONFIG_PATH))
    data: dict[str, dict[str, Any]] = {}
    if path.exists():
        with path.open("rb") as f:
            data = tomllib.load(f)
    elif path != DEFAULT_CONFIG_PATH:
        raise ConfigError(f"configuration file {path} does not exist")
    known = {(section, key): kind for section, key, kind, _, _ in options()}
    for section, values in data.items():
        if section not in _sections() or not isinstance(values, dict):
            raise ConfigError(f"{path}: unknown section [{section}]")
        for key in values:
            if (section, key) not in known:
                raise ConfigError(f"{path}: unknown option {section}.{key}")
    for section, key in known:
        if (value := environ.get(env_name(section, key))) is not None:
            data.setdefault(section, {})[key] = value
    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        if (section, key) not in known:
            raise ConfigError(f"unknown option {dotted}")
        data.setdefault(section, {})[key] = value
    built = {}
    for section, cls in _sections().items():
        values = {
            key: _coerce(value, known[(section, key)], f"{section}.{key}")
            for key, value in data.get(section, {}).items()
        }
        built[section] = cls(**values)
    return Config(**built)
