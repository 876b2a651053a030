"""Measure the understanding stage on the dev splits (none of them used in training).

    .venv/bin/python tools/eval_understanding.py            # prints a Markdown table
    .venv/bin/python tools/eval_understanding.py --errors   # also lists the misses

Splits: CLINC150 val (banking + credit_cards mapped with intent_map.json; the other
domains and oos as non-banking), the 15% BANKING77 hash slice held out of training, NLU++
folds 7-9 (amounts, names), the 20% SGD dialogue slice, plus spoken renderings of the
NLU++ and SGD amounts ("73 pounds" -> "seventy three pounds").
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import nlu_data

from agent.understanding import (
    ACTION_INTENTS,
    BillerDirectory,
    Payee,
    PayeeIndex,
    Understander,
)
from agent.understanding.money import EXPONENTS

NOW = __import__("datetime").datetime(2022, 3, 15, 9, 0)
ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
SPOKEN_CURRENCY = {"GBP": "pounds", "USD": "dollars", "EUR": "euros", "JPY": "yen"}


def say(n: int) -> str:
    """English words for 0 <= n < 10**9 ("two hundred and fifty")."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return ONES[n // 100] + " hundred" + ("" if rest == 0 else " and " + say(rest))
    for scale, word in ((10**6, "million"), (1000, "thousand")):
        if n >= scale:
            rest = n % scale
            tail = "" if rest == 0 else (" and " if rest < 100 else " ") + say(rest)
            return say(n // scale) + " " + word + tail
    raise ValueError(n)


def spoken_amount(value: Decimal, currency: str | None) -> str:
    major = int(value)
    cents = int((value - major) * 100)
    if currency is None:
        return say(major) + (
            "" if not cents else " point " + " ".join(ONES[int(d)] for d in f"{cents:02d}")
        )
    words = say(major) + " " + SPOKEN_CURRENCY[currency]
    if cents:
        words += " " + say(cents)
    return words


def sgd_gold_value(surface: str) -> Decimal:
    """Gold value of an SGD amount span ("$1,630", "980 bucks", "eight hundred and ten")."""
    words = surface.lower().replace("$", "").replace(",", "").split()
    words = [w for w in words if w not in ("dollars", "dollar", "bucks", "usd", "and")]
    if len(words) == 1 and words[0].replace(".", "").isdigit():
        return Decimal(words[0])
    total = seg = 0
    for w in words:
        if w in ONES:
            seg += ONES.index(w)
        elif w in TENS:
            seg += TENS.index(w) * 10
        elif w == "hundred":
            seg *= 100
        elif w == "thousand":
            total += seg * 1000
            seg = 0
        else:
            raise ValueError(surface)
    return Decimal(total + seg)


def gold_minor(value: Decimal, currency: str | None) -> int:
    return int(value * (Decimal(10) ** EXPONENTS.get(currency or "", 2)))


def ece(pairs: list[tuple[float, bool]], bins: int = 10) -> float:
    """Expected calibration error: |accuracy - confidence| per bin, weighted by bin size."""
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        sel = [(c, ok) for c, ok in pairs if lo < c <= hi or (b == 0 and c == 0)]
        if sel:
            acc = sum(ok for _, ok in sel) / len(sel)
            conf = sum(c for c, _ in sel) / len(sel)
            total += len(sel) / len(pairs) * abs(acc - conf)
    return total


def pct(k: int, n: int) -> str:
    return f"{100.0 * k / n:.1f}% ({k}/{n})" if n else "n/a"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--errors", action="store_true")
    ap.add_argument("--model-dir", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    nlu = Understander.load(args.model_dir)
    load_ms = (time.perf_counter() - t0) * 1000
    errors: dict[str, list[str]] = {}

    def miss(kind: str, msg: str) -> None:
        errors.setdefault(kind, []).append(msg)

    rows: list[tuple[str, str]] = []
    latencies: list[float] = []

    cpu_latencies: list[float] = []

    def run(text: str, **kw):
        t = time.perf_counter()
        c = time.thread_time()
        u = nlu.understand(text, now=NOW, **kw)
        cpu_latencies.append((time.thread_time() - c) * 1000)
        latencies.append((time.perf_counter() - t) * 1000)
        return u

    # 1. command intents and non-banking
    clinc = nlu_data.clinc("val")
    ok = n = 0
    nb_action = nb = 0
    yn_ok = yn = 0
    conf_pairs: list[tuple[float, bool]] = []
    for text, label, src in clinc:
        u = run(text)
        conf_pairs.append((u.confidence, u.intent == label))
        if src in ("yes", "no", "cancel"):
            yn += 1
            yn_ok += u.intent == label
            if u.intent != label:
                miss("yes_no", f"{text!r}: {u.intent} (gold {label})")
        elif label in ("out_of_scope",) or (label == "faq" and src == "exchange_rate"):
            nb += 1
            if u.intent in ACTION_INTENTS:
                nb_action += 1
                miss("non_banking_action", f"{text!r} [{src}]: {u.intent} {u.confidence:.2f}")
        else:
            n += 1
            ok += u.intent == label
            if u.intent != label:
                miss("intent", f"{text!r} [{src}]: {u.intent} (gold {label})")
    rows.append(("command intent accuracy, CLINC150 val banking+credit_cards", pct(ok, n)))
    rows.append(("non-banking understood as an action, CLINC150 val other+oos", pct(nb_action, nb)))
    rows.append(
        ("intent confidence calibration, CLINC150 val (ECE, 10 bins)", f"{ece(conf_pairs):.3f}")
    )

    # 2. FAQ topics
    b77 = nlu_data.banking77("dev")
    t_ok = e2e_ok = faq_ok = 0
    for text, topic in b77:
        u = run(text)
        faq_ok += u.intent == "faq"
        topic_pred = u.topic if u.topic else nlu.topic_model.top(text, 1)[0][0]
        t_ok += topic_pred == topic
        e2e_ok += u.intent == "faq" and u.topic == topic
        if u.intent != "faq" or u.topic != topic:
            miss("topic", f"{text!r}: {u.intent}/{u.topic} (gold {topic})")
    rows.append(("FAQ topic accuracy (topic model), BANKING77 dev slice", pct(t_ok, len(b77))))
    rows.append(("FAQ intent+topic both right, BANKING77 dev slice", pct(e2e_ok, len(b77))))
    rows.append(("BANKING77 dev slice understood as faq", pct(faq_ok, len(b77))))

    # 3. amounts, names, yes/no on NLU++ and SGD
    amt_ok = amt_n = sp_ok = sp_n = per_ok = per_n = 0
    spurious = no_amount_n = 0
    spurious_person = no_person_n = 0
    for row in nlu_data.nlupp(nlu_data.NLUPP_DEV_FOLDS):
        text = row["text"]
        slots = row.get("slots", {})
        u = run(text)
        got = u.entities.get("amount")
        if "amount_of_money" in slots:
            v = slots["amount_of_money"]["value"]
            cur = None if v["currency"] == "ambiguous" else v["currency"]
            value = Decimal(str(v["amount"]))
            want = {"minor": gold_minor(value, cur), "currency": cur}
            amt_n += 1
            amt_ok += got == want
            if got != want:
                miss("amount", f"{text!r}: {got} (gold {want})")
            surface = slots["amount_of_money"]["text"]
            spoken = text.replace(surface, spoken_amount(value, cur))
            su = run(spoken)
            sp_n += 1
            sp_ok += su.entities.get("amount") == want
            if su.entities.get("amount") != want:
                miss("amount_spoken", f"{spoken!r}: {su.entities.get('amount')} (gold {want})")
        else:
            no_amount_n += 1
            if got is not None:
                spurious += 1
                miss("amount_spurious", f"{text!r}: {got}")
        if "person_name" not in slots:
            no_person_n += 1
            if "person" in u.entities:
                spurious_person += 1
                miss("person_spurious", f"{text!r}: {u.entities['person']!r}")
        if "person_name" in slots:
            want_p = slots["person_name"]["text"].lower()
            per_n += 1
            got_p = (u.entities.get("person") or "").lower()
            per_ok += got_p == want_p
            if got_p != want_p:
                miss("person", f"{text!r}: {got_p!r} (gold {want_p!r})")
        label = nlu_data.nlupp_intent(row)
        if label in ("confirm", "deny"):
            yn += 1
            yn_ok += u.intent == label
            if u.intent != label:
                miss("yes_no", f"{text!r}: {u.intent} (gold {label})")

    sgd_amt_ok = sgd_amt_n = sgd_per_ok = sgd_per_n = 0
    sgd_int_ok = sgd_int_n = 0
    rng = random.Random(3)
    for text, label, row in nlu_data.sgd("dev"):
        u = run(text)
        for span in row["slot_spans"]:
            if span["slot"] == "amount":
                value = sgd_gold_value(span["text"])
                want = {"minor": gold_minor(value, "USD"), "currency": "USD"}
                sgd_amt_n += 1
                got = u.entities.get("amount")
                sgd_amt_ok += got == want
                if got != want:
                    miss("amount_sgd", f"{text!r}: {got} (gold {want})")
                spoken = text.replace(span["text"], spoken_amount(value, "USD"))
                su = run(spoken)
                sp_n += 1
                sp_ok += su.entities.get("amount") == want
                if su.entities.get("amount") != want:
                    miss("amount_spoken", f"{spoken!r}: {su.entities.get('amount')} ({want})")
            if span["slot"] == "recipient_account_name":
                sgd_per_n += 1
                got_p = (u.entities.get("person") or "").lower()
                sgd_per_ok += got_p == span["text"].lower()
                if got_p != span["text"].lower():
                    miss("person_sgd", f"{text!r}: {got_p!r} (gold {span['text']!r})")
        if label in ("confirm", "deny"):
            yn += 1
            yn_ok += u.intent == label
            if u.intent != label:
                miss("yes_no", f"{text!r}: {u.intent} (gold {label})")
        elif label:
            sgd_int_n += 1
            sgd_int_ok += u.intent == label
            if u.intent != label:
                miss("intent_sgd", f"{text!r}: {u.intent} (gold {label})")
    del rng
    rows.append(("amount+currency exact, NLU++ folds 7-9 (written)", pct(amt_ok, amt_n)))
    rows.append(("amount+currency exact, SGD dev slice (written)", pct(sgd_amt_ok, sgd_amt_n)))
    rows.append(("amount+currency exact, spoken renderings of the above", pct(sp_ok, sp_n)))
    rows.append(("spurious amount on NLU++ utterances without one", pct(spurious, no_amount_n)))
    rows.append(("person name exact, NLU++ folds 7-9", pct(per_ok, per_n)))
    rows.append(
        ("a person found in NLU++ 7-9 utterances without one", pct(spurious_person, no_person_n))
    )
    rows.append(("person name exact, SGD dev slice", pct(sgd_per_ok, sgd_per_n)))
    rows.append(("command intent accuracy, SGD dev slice", pct(sgd_int_ok, sgd_int_n)))
    rows.append(("yes/no/cancel accuracy (CLINC val, NLU++ 7-9, SGD dev)", pct(yn_ok, yn)))

    # 4. latency
    lat = sorted(latencies)
    p50 = statistics.median(lat)
    p99 = lat[int(0.99 * (len(lat) - 1))]
    rows.append(
        (
            f"understand() latency (wall), {len(lat)} utterances, one thread",
            f"p50 {p50:.3f} ms, p99 {p99:.3f} ms, max {lat[-1]:.2f} ms",
        )
    )
    cpu = sorted(cpu_latencies)
    rows.append(
        (
            "understand() latency (thread CPU time: immune to waiting for a busy core)",
            f"p50 {statistics.median(cpu):.3f} ms, p99 {cpu[int(0.99 * (len(cpu) - 1))]:.3f} ms,"
            f" max {cpu[-1]:.2f} ms",
        )
    )
    rows.append(("Understander.load()", f"{load_ms:.0f} ms"))

    # payee lookup: 1,000 saved payees per call, 100,000-entry biller directory
    rng = random.Random(11)
    first = [
        "ken",
        "yuki",
        "hiroshi",
        "mary",
        "john",
        "aiko",
        "david",
        "sarah",
        "takeshi",
        "emma",
        "li",
        "priya",
        "carlos",
        "kenji",
        "olivia",
        "ryo",
        "haruto",
        "sophie",
    ]
    last = [
        "sato",
        "suzuki",
        "takahashi",
        "tanaka",
        "watanabe",
        "ito",
        "yamamoto",
        "nakamura",
        "kobayashi",
        "saito",
        "kato",
        "yoshida",
        "smith",
        "jones",
        "brown",
        "patel",
        "garcia",
        "wilson",
        "taylor",
        "nguyen",
        "ohno",
        "inoue",
        "kimura",
        "hayashi",
    ]
    payees = [
        Payee(f"p{i}", f"{rng.choice(first)} {rng.choice(last)}{i % 7 or ''}") for i in range(1000)
    ]
    t = time.thread_time()
    index = PayeeIndex(payees)
    build_ms = (time.thread_time() - t) * 1000
    qs = ["ken satoh", "hiroshi saitou", "mary jonz", "kan sat oh", "yuki suzuki"] * 40
    ts = []
    for q in qs:
        t = time.thread_time()
        index.search(q, k=3)
        ts.append((time.thread_time() - t) * 1000)
    ts.sort()
    rows.append(
        (
            "PayeeIndex, 1,000 payees: build / search p50 / p99 (thread CPU time)",
            f"{build_ms:.1f} ms / {statistics.median(ts):.3f} ms / "
            f"{ts[int(0.99 * (len(ts) - 1))]:.3f} ms",
        )
    )
    words = [
        "tokyo",
        "osaka",
        "electric",
        "gas",
        "water",
        "mobile",
        "telecom",
        "insurance",
        "city",
        "council",
        "broadband",
        "energy",
        "power",
        "credit",
        "card",
        "services",
        "north",
        "south",
        "east",
        "west",
        "home",
        "auto",
        "life",
        "health",
        "net",
    ]
    syll = [
        "ka",
        "ki",
        "ko",
        "sa",
        "shi",
        "to",
        "na",
        "mi",
        "ra",
        "yu",
        "ta",
        "ro",
        "ha",
        "jo",
        "an",
        "el",
        "mar",
        "son",
        "ber",
        "li",
        "da",
        "vi",
        "en",
        "ne",
        "po",
        "gu",
    ]

    def brand() -> str:
        return "".join(rng.choice(syll) for _ in range(rng.randint(2, 3)))

    # 100,000 synthetic billers: an invented brand plus one or two service words
    billers = [
        Payee(f"b{i}", f"{brand()} {rng.choice(words)} {rng.choice(words)}", "biller")
        for i in range(100_000)
    ]
    billers[4242] = Payee("b4242", "Tokyo Electric Power", "biller")
    t = time.thread_time()
    directory = BillerDirectory(billers)
    dbuild = (time.thread_time() - t) * 1000
    ts = []
    top_ok = 0
    for q in ["tokyo electric power", "tokio electrik power", "tokyo electric pour"] * 10:
        t = time.thread_time()
        res = directory.search(q, k=3)
        ts.append((time.thread_time() - t) * 1000)
        top_ok += bool(res) and res[0].id == "b4242"
    ts.sort()
    rows.append(
        (
            "BillerDirectory, 100,000 entries: build / search p50 / p99 / top-1 (thread CPU)",
            f"{dbuild:.0f} ms / {statistics.median(ts):.2f} ms / "
            f"{ts[int(0.99 * (len(ts) - 1))]:.2f} ms / {top_ok}/30",
        )
    )

    print("| measure | result |\n| --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value} |")
    if args.errors:
        for kind, msgs in errors.items():
            print(f"\n## {kind} ({len(msgs)})")
            for m in msgs[:60]:
                print("  ", m)


if __name__ == "__main__":
    main()
