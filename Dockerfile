# CPU image running the embedded defaults: Silero VAD, the embedded ASR (pocketsphinx +
# Whisper tiny.en) and the fast understanding path. No GPU, no network at run time.
#   docker build -t banking-voice-agent .
#   docker run -p 8765:8765 banking-voice-agent
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1
WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml README.md ./
RUN mkdir -p agent protocol clients loadtest \
 && touch agent/__init__.py protocol/__init__.py clients/__init__.py loadtest/__init__.py \
 && pip install . \
 # silero-vad's metadata pulls torch; we only need its ONNX file (run on onnxruntime).
 && pip install --no-deps "silero-vad==6.2.3" \
 && pip uninstall -y banking-voice-agent

COPY agent agent
COPY protocol protocol
COPY clients clients
COPY configs configs
COPY data data
# Editable, so the package finds data/ and configs/ beside it in /app.
RUN pip install --no-deps -e . \
 # The embedded bank's SQLite file lives in var/ (mount a volume there to keep it).
 && mkdir -p /app/var && chown nobody /app/var

EXPOSE 8765
# Inside a container the server must listen on all interfaces to be reachable.
ENV AGENT_SERVER_HOST=0.0.0.0 AGENT_CONFIG=/app/configs/agent.toml
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz')"
USER nobody
CMD ["python", "-m", "agent", "serve"]
