import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import ConfigError, load_config, options

ROOT = Path(__file__).resolve().parent.parent


def test_defaults_come_from_the_shipped_file() -> None:
    config = load_config(environ={})
    assert (config.server.host, config.server.port) == ("127.0.0.1", 8765)
    assert config.asr.backend == "embedded"


def test_environment_overrides_file_and_flags_override_environment(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text("[server]\nport = 9000\nmax_calls = 3\n[vad]\nadaptive = true\n")
    env = {"AGENT_SERVER_PORT": "9100", "AGENT_VAD_ADAPTIVE": "off"}
    config = load_config(path, environ=env, overrides={"server.port": "9200"})
    assert config.server.port == 9200
    assert config.server.max_calls == 3
    assert config.vad.adaptive is False


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("[server]\nprot = 1\n", {}, "unknown option server.prot"),
        ("[nope]\n", {}, "unknown section"),
        ("", {"AGENT_SERVER_PORT": "eighty"}, "expected int"),
        ("[vad]\nadaptive = 3\n", {}, "expected bool"),
    ],
)
def test_bad_configuration_is_reported(tmp_path: Path, text: str, env: dict, message: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path, environ=env)


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml", environ={})


def test_serve_help_explains_every_option() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agent", "serve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for section, key, _kind, _default, _help in options():
        assert f"--{section}.{key}" in out
        assert f"AGENT_{section}_{key}".upper() in out.replace("\n", "").replace(" ", "")
