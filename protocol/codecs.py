"""Audio codecs used at the edges of the pipeline: PCM16, G.711 mu-law, resampling.

Pure functions over bytes and numpy arrays; no I/O. Inside the pipeline audio is always
16 kHz mono PCM16 little-endian; transports call these to get there and back.
"""

from __future__ import annotations

import numpy as np
import soxr

PIPELINE_SAMPLE_RATE = 16_000

_PCM16 = np.dtype("<i2")


def pcm16_to_array(data: bytes) -> np.ndarray:
    """Little-endian PCM16 bytes -> int16 array. Raises ValueError on an odd byte count."""
    if len(data) % 2:
        raise ValueError(f"PCM16 audio needs an even number of bytes, got {len(data)}")
    return np.frombuffer(data, dtype=_PCM16).astype(np.int16, copy=False)


def array_to_pcm16(samples: np.ndarray) -> bytes:
    """int16 (or float in [-1, 1]) array -> little-endian PCM16 bytes."""
    if samples.dtype.kind == "f":
        samples = float_to_int16(samples)
    return samples.astype(_PCM16, copy=False).tobytes()


def int16_to_float(samples: np.ndarray) -> np.ndarray:
    return samples.astype(np.float32) / 32768.0


def float_to_int16(samples: np.ndarray) -> np.ndarray:
    return (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype(np.int16)


# --- G.711 mu-law -------------------------------------------------------------------------
# Table-driven: decoding is a 256-entry lookup, encoding a 64k-entry lookup built once.

_MULAW_BIAS = 0x84
_MULAW_CLIP = 32635


def _mulaw_decode_table() -> np.ndarray:
    codes = ~np.arange(256, dtype=np.int32) & 0xFF
    sign = codes & 0x80
    exponent = (codes >> 4) & 0x07
    mantissa = codes & 0x0F
    magnitude = (((mantissa << 3) + _MULAW_BIAS) << exponent) - _MULAW_BIAS
    return np.where(sign != 0, -magnitude, magnitude).astype(np.int16)


def _mulaw_encode_table() -> np.ndarray:
    pcm = np.arange(-32768, 32768, dtype=np.int32)
    sign = np.where(pcm < 0, 0x80, 0)
    magnitude = np.minimum(np.abs(pcm), _MULAW_CLIP) + _MULAW_BIAS
    exponent = np.floor(np.log2(magnitude)).astype(np.int32) - 7
    exponent = np.clip(exponent, 0, 7)
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8)


_MULAW_TO_PCM = _mulaw_decode_table()
_PCM_TO_MULAW = _mulaw_encode_table()


def mulaw_decode(data: bytes) -> np.ndarray:
    """G.711 mu-law bytes -> int16 samples."""
    return _MULAW_TO_PCM[np.frombuffer(data, dtype=np.uint8)]


def mulaw_encode(samples: np.ndarray) -> bytes:
    """int16 samples -> G.711 mu-law bytes."""
    return _PCM_TO_MULAW[samples.astype(np.int32) + 32768].tobytes()


# --- Resampling -----------------------------------------------------------------------------


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Resample a whole int16 signal (offline; for streams use :class:`StreamResampler`)."""
    if from_rate == to_rate:
        return samples
    return soxr.resample(samples, from_rate, to_rate, quality="HQ")


class StreamResampler:
    """Chunk-by-chunk resampling with filter state carried between chunks.

    A stateless per-chunk resample would click at every chunk boundary; soxr's stream
    object keeps the filter history. ``flush()`` returns the samples held back at the end.
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        self.from_rate = from_rate
        self.to_rate = to_rate
        self._stream = (
            None
            if from_rate == to_rate
            else soxr.ResampleStream(from_rate, to_rate, 1, dtype="int16", quality="HQ")
        )

    def process(self, samples: np.ndarray) -> np.ndarray:
        if self._stream is None:
            return samples
        return self._stream.resample_chunk(samples)

    def flush(self) -> np.ndarray:
        if self._stream is None:
            return np.zeros(0, dtype=np.int16)
        return self._stream.resample_chunk(np.zeros(0, dtype=np.int16), last=True)


class AudioDecoder:
    """Wire audio of a session (codec, sample rate) -> pipeline PCM16 at 16 kHz."""

    CODECS = ("pcm16", "mulaw")

    def __init__(self, codec: str, sample_rate: int) -> None:
        if codec not in self.CODECS:
            raise ValueError(f"unsupported codec {codec!r}; expected one of {self.CODECS}")
        self.codec = codec
        self._resampler = StreamResampler(sample_rate, PIPELINE_SAMPLE_RATE)

    def decode(self, data: bytes) -> np.ndarray:
        samples = mulaw_decode(data) if self.codec == "mulaw" else pcm16_to_array(data)
        return self._resampler.process(samples)

    def flush(self) -> np.ndarray:
        return self._resampler.flush()
