"""Silero VAD on onnxruntime, without torch.

The silero-vad PyPI package ships its ONNX model as package data; we locate the file with
``importlib.util.find_spec`` so that importing the package (which imports torch) never
happens. One :class:`SileroVAD` (one ONNX session) serves every call; each call owns a
:class:`VADState` with the recurrent state and the 64-sample context window.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort

WINDOW_SAMPLES = 512  # 32 ms at 16 kHz: the window silero's 16 kHz model is trained on
CONTEXT_SAMPLES = 64
SAMPLE_RATE = 16_000


def bundled_model_path() -> Path:
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "silero-vad is not installed; scripts/setup installs it with --no-deps"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "silero_vad.onnx"
    if not path.is_file():
        raise FileNotFoundError(f"silero-vad's ONNX model is missing at {path}")
    return path


@dataclass(slots=True)
class VADState:
    state: np.ndarray = field(default_factory=lambda: np.zeros((2, 1, 128), dtype=np.float32))
    context: np.ndarray = field(
        default_factory=lambda: np.zeros((1, CONTEXT_SAMPLES), dtype=np.float32)
    )


class SileroVAD:
    """Speech probability for successive 512-sample windows of 16 kHz audio."""

    def __init__(self, model_path: Path | None = None, *, threads: int = 1) -> None:
        options = ort.SessionOptions()
        # One thread per inference: calls run side by side in a pool, so intra-op
        # parallelism would only make them fight for the cores.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            str(model_path or bundled_model_path()),
            sess_options=options,
            providers=["CPUExecutionProvider"],
        )
        self._sr = np.array(SAMPLE_RATE, dtype=np.int64)

    def probability(self, state: VADState, window: np.ndarray) -> float:
        """Speech probability of one window of float32 samples in [-1, 1]."""
        if window.shape != (WINDOW_SAMPLES,):
            raise ValueError(f"VAD windows are {WINDOW_SAMPLES} samples, got {window.shape}")
        frame = np.concatenate([state.context, window[np.newaxis, :]], axis=1)
        out, state.state = self._session.run(
            None, {"input": frame, "state": state.state, "sr": self._sr}
        )
        state.context = frame[:, -CONTEXT_SAMPLES:]
        return float(out[0, 0])
