"""Train the fast-path intent and FAQ-topic models and export them as .npz artefacts.

    .venv/bin/python tools/train_intents.py            # writes agent/understanding/model/*.npz
    .venv/bin/python tools/train_intents.py --eval     # also prints dev accuracy

Training-time dependency: scikit-learn (logistic regression). The run time only needs
numpy: the artefacts hold the vocabulary, the weight matrix (float16) and the bias.
Features come from agent.understanding.features.extract, the same function used at run
time, so training and serving cannot drift.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import nlu_data
import synth_commands

from agent.understanding.features import extract

B77_WEIGHT = 0.35
CLINC_BANKING_WEIGHT = 1.0  # the banking and credit-card intents, the command set's source
MODEL_DIR = Path(__file__).resolve().parents[1] / "agent" / "understanding" / "model"


def fine_label(label: str, src: str, mapping: dict[str, str]) -> str:
    """CLINC150 intents stay fine-grained ("clinc:report_lost_card", "clinc:weather"): a merged
    class ("faq" mixing CLINC and BANKING77 styles, or 120 domains as one "out_of_scope")
    is harder for a linear model than its parts. Probabilities are summed back at run time."""
    del mapping
    return "clinc:" + src if src != "oos" else label


def coarse(fine: str, mapping: dict[str, str]) -> str:
    if fine.startswith("b77:"):
        return "faq"
    if not fine.startswith("clinc:"):
        return fine
    src = fine[6:]
    if src in mapping:
        return mapping[src]
    return nlu_data.clinc_label(src, "", mapping)


def intent_training_set() -> list[tuple[str, str, float]]:
    """(text, fine label, sample weight)."""
    mapping = nlu_data.intent_map()["clinc150"]
    rows: list[tuple[str, str, float]] = []
    for text, label, src in nlu_data.clinc("train"):
        weight = CLINC_BANKING_WEIGHT if src in mapping and src != "oos" else 1.0
        rows.append((text, fine_label(label, src, mapping), weight))
    # BANKING77 is large and all faq: down-weighted so that it does not swamp the commands.
    # (One class per topic instead was measured: no better on CLINC, 2x slower to train.)
    for text, _topic in nlu_data.banking77("train"):
        rows.append((text, "faq", B77_WEIGHT))
    for text, label in nlu_data.rasa() + nlu_data.ibm():
        rows.append((text, label, 1.0))
    for text, label, _row in nlu_data.sgd("train"):
        if label:
            rows.append((text, label, 0.5))
    for row in nlu_data.nlupp(tuple(i for i in range(10) if i not in nlu_data.NLUPP_DEV_FOLDS)):
        label = nlu_data.nlupp_intent(row)
        if label:
            rows.append((row["text"], label, 1.0))
    for text, label in synth_commands.generate():
        rows.append((text, label, 1.0))
    return rows


def build_matrix(texts: list[str], vocab: dict[str, int] | None, min_count: int = 2):
    from scipy.sparse import csr_matrix

    feats = [extract(t) for t in texts]
    if vocab is None:
        counts: Counter[str] = Counter()
        for f in feats:
            counts.update(f.keys())
        names = sorted(k for k, c in counts.items() if c >= min_count)
        vocab = {k: i for i, k in enumerate(names)}
    indptr, indices, data = [0], [], []
    for f in feats:
        idx = [vocab[k] for k in f if k in vocab]
        # Re-normalise over the kept features, exactly as the run time does.
        w = 1.0 / np.sqrt(len(idx)) if idx else 0.0
        indices.extend(idx)
        data.extend([w] * len(idx))
        indptr.append(len(indices))
    x = csr_matrix((data, indices, indptr), shape=(len(texts), len(vocab)), dtype=np.float32)
    return x, vocab


def fit(texts, labels, weights, c: float):
    from sklearn.linear_model import LogisticRegression

    x, vocab = build_matrix(texts, None)
    clf = LogisticRegression(C=c, max_iter=3000, tol=1e-4)
    clf.fit(x, labels, sample_weight=weights)
    return clf, vocab


PRUNE = 0.05  # weights below this change no decision on the dev splits (measured)


def export(path: Path, clf, vocab: dict[str, int], groups: list[str] | None = None) -> None:
    """Write vocabulary, pruned sparse weights (CSR over features, float16) and bias.

    Every training feature stays in the vocabulary: the run time L2-normalises over the
    features it finds there, exactly as build_matrix does here.
    """
    from scipy.sparse import csr_matrix

    names = np.array(sorted(vocab, key=vocab.get))
    coef = clf.coef_.T.astype(np.float32)  # (n_features, n_classes)
    coef[np.abs(coef) < PRUNE] = 0.0
    sparse = csr_matrix(coef)
    col_dtype = np.uint8 if coef.shape[1] <= 256 else np.uint16
    np.savez_compressed(
        path,
        vocab=names,
        indptr=sparse.indptr.astype(np.int32),
        cols=sparse.indices.astype(col_dtype),
        vals=sparse.data.astype(np.float16),
        n_classes=np.array(coef.shape[1]),
        bias=clf.intercept_.astype(np.float32),
        classes=np.array(clf.classes_),
        groups=np.array(groups if groups is not None else clf.classes_),
    )
    print(
        f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB, {len(names)} features, "
        f"{sparse.nnz} weights kept)"
    )


def write_lexicon() -> None:
    """Common words: a word outside this list after "to"/"from" is likely a name.

    Every word seen at least twice in the training text of CLINC150, BANKING77, NLU++
    (folds 0-6), SGD and the Rasa/IBM sets, except words inside a labelled person name.
    """
    import json

    from agent.understanding.tokens import tokenize

    counts: Counter[str] = Counter()
    names: set[str] = set()
    texts = [t for t, _l, _s in nlu_data.clinc("train")]
    texts += [t for t, _c in nlu_data.banking77("train")]
    texts += [t for t, _l in nlu_data.rasa() + nlu_data.ibm()]
    for row in nlu_data.nlupp(tuple(i for i in range(10) if i not in nlu_data.NLUPP_DEV_FOLDS)):
        texts.append(row["text"])
        if "person_name" in row.get("slots", {}):
            names.update(row["slots"]["person_name"]["text"].lower().split())
    for text, _label, row in nlu_data.sgd("train"):
        texts.append(text)
        for span in row["slot_spans"]:
            if span["slot"] == "recipient_account_name":
                names.update(span["text"].lower().split())
    for text in texts:
        counts.update(t.text for t in tokenize(text) if t.kind == "word")
    words = sorted(w for w, c in counts.items() if c >= 2 and w not in names)
    path = MODEL_DIR / "lexicon.json"
    path.write_text(json.dumps(words, separators=(",", ":")), encoding="utf-8")
    print(f"wrote {path} ({len(words)} words)")


def main() -> None:
    global B77_WEIGHT, CLINC_BANKING_WEIGHT, MODEL_DIR
    ap = argparse.ArgumentParser()
    ap.add_argument("--intent-c", type=float, default=150.0)
    ap.add_argument("--topic-c", type=float, default=30.0)
    ap.add_argument("--topic-svc", type=float, default=1.0, help="LinearSVC C for topics (0: LR)")
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--only", choices=["intent", "topic", "lexicon"], default=None)
    ap.add_argument("--b77-weight", type=float, default=B77_WEIGHT)
    ap.add_argument("--clinc-banking-weight", type=float, default=CLINC_BANKING_WEIGHT)
    ap.add_argument("--out", type=Path, default=MODEL_DIR)
    args = ap.parse_args()
    B77_WEIGHT = args.b77_weight
    CLINC_BANKING_WEIGHT = args.clinc_banking_weight
    MODEL_DIR = args.out
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    write_lexicon()
    if args.only == "lexicon":
        return

    if args.only in (None, "intent"):
        rows = intent_training_set()
        print("intent training rows:", len(rows), "classes:", len({r[1] for r in rows}))
        t0 = time.time()
        clf, vocab = fit(
            [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], args.intent_c
        )
        print(f"intent model trained in {time.time() - t0:.1f}s")
        mapping = nlu_data.intent_map()["clinc150"]
        export(MODEL_DIR / "intent.npz", clf, vocab, [coarse(c, mapping) for c in clf.classes_])
        if args.eval:
            dev = nlu_data.clinc("val")
            x, _ = build_matrix([d[0] for d in dev], vocab)
            pred = [coarse(c, mapping) for c in clf.predict(x)]
            acc = np.mean([p == d[1] for p, d in zip(pred, dev, strict=True)])
            print(f"CLINC val mapped-intent accuracy: {acc:.4f}")

    if args.only in (None, "topic"):
        train = nlu_data.banking77("train")
        t0 = time.time()
        if args.topic_svc:
            from sklearn.svm import LinearSVC

            x, vocab = build_matrix([t for t, _ in train], None)
            clf = LinearSVC(C=args.topic_svc).fit(x, [c for _, c in train])
        else:
            clf, vocab = fit([t for t, _ in train], [c for _, c in train], None, args.topic_c)
        print(f"topic model trained in {time.time() - t0:.1f}s")
        export(MODEL_DIR / "topic.npz", clf, vocab)
        if args.eval:
            dev = nlu_data.banking77("dev")
            x, _ = build_matrix([t for t, _ in dev], vocab)
            pred = clf.predict(x)
            acc = np.mean([p == c for p, (_, c) in zip(pred, dev, strict=True)])
            print(f"BANKING77 dev topic accuracy: {acc:.4f}")


if __name__ == "__main__":
    main()
