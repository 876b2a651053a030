"""Run time of the linear intent and topic models: numpy only, weights from a .npz file.

The artefacts are written by tools/train_intents.py (multinomial logistic regression over
features.extract). Prediction gathers the rows of the weight matrix for the features
present, sums them and applies a softmax: a few tens of microseconds per utterance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.understanding.features import extract


class LinearModel:
    def __init__(self, path: Path) -> None:
        with np.load(path, allow_pickle=False) as z:
            vocab = z["vocab"].tolist()
            if "weights" in z.files:
                self.weights = z["weights"].astype(np.float32)
            else:  # pruned CSR over features, expanded to a dense matrix once
                indptr = z["indptr"]
                self.weights = np.zeros((len(vocab), int(z["n_classes"])), dtype=np.float32)
                rows = np.repeat(np.arange(len(vocab)), np.diff(indptr))
                self.weights[rows, z["cols"].astype(np.int64)] = z["vals"].astype(np.float32)
            self.bias = z["bias"].astype(np.float32)
            self.classes: list[str] = [str(c) for c in z["classes"].tolist()]
            self.temperature = float(z["temperature"]) if "temperature" in z.files else 1.0
            groups = z["groups"].tolist() if "groups" in z.files else self.classes
        # Fine-grained training classes ("clinc:report_lost_card") sum into the output
        # labels ("lock_card"): a 0/1 matrix of shape (n_classes, n_labels).
        self.labels: list[str] = sorted({str(g) for g in groups})
        self.group_matrix = np.zeros((len(self.classes), len(self.labels)), dtype=np.float32)
        for i, g in enumerate(groups):
            self.group_matrix[i, self.labels.index(str(g))] = 1.0
        self.index = {name: i for i, name in enumerate(vocab)}
        self.weights.setflags(write=False)

    def scores(self, text: str) -> np.ndarray:
        feats = extract(text)
        idx = [self.index[k] for k in feats if k in self.index]
        logits = self.bias.copy()
        if idx:
            logits += self.weights[idx].sum(axis=0) * (1.0 / np.sqrt(len(idx)))
        return logits

    def predict_proba(self, text: str) -> np.ndarray:
        logits = self.scores(text) / self.temperature
        logits -= logits.max()
        e = np.exp(logits)
        return e / e.sum()

    def label_proba(self, text: str) -> np.ndarray:
        return self.predict_proba(text) @ self.group_matrix

    def top(self, text: str, k: int = 2) -> list[tuple[str, float]]:
        """The k most probable output labels with their (summed) probabilities."""
        p = self.label_proba(text)
        order = np.argsort(-p)[:k]
        return [(self.labels[i], float(p[i])) for i in order]
