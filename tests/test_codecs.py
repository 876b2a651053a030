import numpy as np
import pytest

from protocol.codecs import (
    AudioDecoder,
    StreamResampler,
    array_to_pcm16,
    mulaw_decode,
    mulaw_encode,
    pcm16_to_array,
    resample,
)


def tone(rate: int, seconds: float = 0.5, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (np.sin(2 * np.pi * hz * t) * 12_000).astype(np.int16)


def test_pcm16_round_trip_is_exact() -> None:
    samples = np.array([0, 1, -1, 32767, -32768, 1234], dtype=np.int16)
    assert array_to_pcm16(samples) == samples.astype("<i2").tobytes()
    assert np.array_equal(pcm16_to_array(array_to_pcm16(samples)), samples)


def test_pcm16_rejects_odd_byte_counts() -> None:
    with pytest.raises(ValueError, match="even number of bytes"):
        pcm16_to_array(b"\x00\x01\x02")


def test_mulaw_matches_g711_reference_points() -> None:
    # G.711: 0xFF and 0x7F are the two zeros, 0x00 / 0x80 the extremes.
    decoded = mulaw_decode(bytes([0xFF, 0x7F, 0x00, 0x80]))
    assert decoded.tolist() == [0, 0, -32124, 32124]
    assert mulaw_encode(np.array([0], dtype=np.int16)) == b"\xff"


def test_mulaw_round_trip_error_is_within_quantisation() -> None:
    samples = tone(8_000)
    restored = mulaw_decode(mulaw_encode(samples)).astype(np.int32)
    error = np.abs(restored - samples.astype(np.int32))
    # mu-law step is about 3% of the magnitude; never worse than one step.
    assert np.all(error <= np.abs(samples.astype(np.int32)) * 0.07 + 16)


@pytest.mark.parametrize("rate", [8_000, 24_000, 44_100, 48_000])
def test_resample_preserves_duration_and_pitch(rate: int) -> None:
    out = resample(tone(rate, 1.0), rate, 16_000)
    assert abs(len(out) - 16_000) <= 2
    spectrum = np.abs(np.fft.rfft(out.astype(np.float32)))
    assert abs(np.argmax(spectrum) * 16_000 / len(out) - 440) < 3


def test_stream_resampler_equals_offline_resampling() -> None:
    signal = tone(48_000, 1.0)
    stream = StreamResampler(48_000, 16_000)
    pieces = [stream.process(signal[i : i + 960]) for i in range(0, len(signal), 960)]
    streamed = np.concatenate([*pieces, stream.flush()])
    assert abs(len(streamed) - 16_000) <= 2
    offline = resample(signal, 48_000, 16_000)
    n = min(len(streamed), len(offline)) - 100
    assert np.max(np.abs(streamed[100:n].astype(int) - offline[100:n].astype(int))) < 200


def test_audio_decoder_mulaw_8k_to_16k() -> None:
    decoder = AudioDecoder("mulaw", 8_000)
    out = np.concatenate([decoder.decode(mulaw_encode(tone(8_000, 1.0))), decoder.flush()])
    assert abs(len(out) - 16_000) <= 2


def test_audio_decoder_rejects_unknown_codec() -> None:
    with pytest.raises(ValueError, match="unsupported codec"):
        AudioDecoder("opus", 48_000)
