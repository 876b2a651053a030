"""Production TTS: NVIDIA Riva's streaming synthesis (SynthesizeOnline) over grpc.aio.

Each phrase is one SynthesizeOnline call asking for 16 kHz LINEAR_PCM, so audio needs no
conversion; chunks are forwarded as Riva streams them. Riva needs a GPU, so the tests
run this client against a stand-in server speaking Riva's protocol (a contract test).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import grpc
from riva.client.proto import riva_audio_pb2, riva_tts_pb2, riva_tts_pb2_grpc

from agent.tts.base import SAMPLE_RATE, SynthesisStream, TTSError
from agent.tts.stream import PhraseSynthesisStream


class RivaSynthesizer:
    """Args:
    uri: host:port of the Riva server.
    use_ssl: TLS to the server.
    voice: Riva voice name (empty: the server's default voice).
    language: language code.
    timeout_s: deadline for synthesising one phrase.
    metadata: extra gRPC metadata (e.g. an API key header).
    """

    name = "riva"

    def __init__(
        self,
        uri: str = "localhost:50051",
        *,
        use_ssl: bool = False,
        voice: str = "",
        language: str = "en-US",
        timeout_s: float = 10.0,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> None:
        self._channel = (
            grpc.aio.secure_channel(uri, grpc.ssl_channel_credentials())
            if use_ssl
            else grpc.aio.insecure_channel(uri)
        )
        self._stub = riva_tts_pb2_grpc.RivaSpeechSynthesisStub(self._channel)
        self._voice, self._language = voice, language
        self._timeout_s = timeout_s
        self._metadata = tuple(metadata)

    async def _render(self, phrase: str) -> AsyncIterator[bytes]:
        request = riva_tts_pb2.SynthesizeSpeechRequest(
            text=phrase,
            language_code=self._language,
            encoding=riva_audio_pb2.AudioEncoding.LINEAR_PCM,
            sample_rate_hz=SAMPLE_RATE,
            voice_name=self._voice,
        )
        call = self._stub.SynthesizeOnline(
            request, timeout=self._timeout_s, metadata=self._metadata or None
        )
        try:
            async for response in call:
                if response.audio:
                    yield response.audio
        except grpc.aio.AioRpcError as exc:
            raise TTSError(f"Riva TTS {exc.code().name}: {exc.details()}") from exc
        finally:
            call.cancel()  # a no-op when finished; stops Riva when we were cancelled

    def stream(self) -> SynthesisStream:
        return PhraseSynthesisStream(self._render)

    async def aclose(self) -> None:
        await self._channel.close()
