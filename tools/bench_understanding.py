"""Benchmarks for the understanding stage: overlap with partials, adaptive end of turn.

    .venv/bin/python tools/bench_understanding.py [--short-ms 250] [--long-ms 900] [--base-ms 600]

1. Overlap: each utterance is streamed as word-by-word ASR partials to a PartialTracker
   (1,000 saved payees); we time final-transcript -> understanding ready, against a
   sequential run that builds the payee index and understands only at the final. Both in
   the same process, side by side, with the name caches cleared before each run. Times
   are the thread's CPU time (the 2-core machine is shared; waiting for a core is not
   the stage's latency).
2. Adaptive end of turn: with a fixed endpointer silence of --base-ms, every turn waits
   that long after the last word. With the adaptive rule, a partial that is a complete
   command waits --short-ms, a clearly cut one (--long-ms) waits longer, anything else
   the base. We report the mean wait after the last word (end-of-speech -> end of turn)
   and the cut-off risk: proper prefixes of an utterance that are judged complete, where
   a mid-utterance pause longer than the short silence would end the turn too early.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.understanding import PartialTracker, Payee, Understander
from agent.understanding.payees import PayeeIndex
from agent.understanding.phonetic import fold_name, fold_token, phonetic_key, token_key

NOW = datetime(2022, 3, 15, 9, 0)
UTTERANCES = [
    "send fifty pounds to ken sato",
    "what's my balance",
    "transfer two hundred and fifty dollars to hiroshi saito tomorrow",
    "pay my british gas bill",
    "lock my card ending one two three four",
    "send five thousand yen to yuki ohno on the fifth",
    "show me my recent transactions",
    "unlock my debit card",
    "i want to send forty two fifty to mary jones next friday",
    "how much money do i have in my savings account",
    "can you move a grand from checking to savings",
    "pay ken sato twenty quid",
    "let me talk to a real person",
    "yes",
    "no cancel that",
    "send one hundred and twenty euros to takeshi ito",
    "how long does an international transfer take",
    "freeze my credit card i think it was stolen",
]


def payees(n: int = 1000) -> list[Payee]:
    rng = random.Random(4)
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
        "satou",
        "suzuki",
        "takahashi",
        "tanaka",
        "watanabe",
        "itoh",
        "yamamoto",
        "nakamura",
        "kobayashi",
        "saitoh",
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
    ]
    out = [
        Payee("p1", "Ken Sato"),
        Payee("p2", "Hiroshi Saito"),
        Payee("p3", "Mary Jones"),
        Payee("p4", "Yuki Ohno"),
        Payee("p5", "Takeshi Ito"),
        Payee("b1", "British Gas", "biller"),
    ]
    while len(out) < n:
        out.append(
            Payee(f"x{len(out)}", f"{rng.choice(first)} {rng.choice(last)}-{rng.choice(last)}")
        )
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[int(q * (len(xs) - 1))]


def bench_overlap(nlu: Understander, plist: list[Payee], rounds: int) -> None:
    first: list[float] = []
    seq: list[float] = []
    ovl: list[float] = []
    rev: list[float] = []
    for _ in range(rounds):
        for text in UTTERANCES:
            words = text.split()
            # sequential, first turn of a call: index built and text understood at the final
            for cached in (fold_name, phonetic_key, fold_token, token_key):
                cached.cache_clear()
            t = time.thread_time()
            index = PayeeIndex(plist)
            nlu.understand(text, payees=index, now=NOW)
            first.append((time.thread_time() - t) * 1000)
            # sequential, later turn: the call's index exists, the text is understood at the final
            t = time.thread_time()
            nlu.understand(text, payees=index, now=NOW)
            seq.append((time.thread_time() - t) * 1000)
            # overlapped: the partials were understood while the caller spoke
            for cached in (fold_name, phonetic_key, fold_token, token_key):
                cached.cache_clear()
            tracker = PartialTracker(nlu, payees=plist, now=NOW)
            for k in range(1, len(words) + 1):
                tracker.update(" ".join(words[:k]))
            t = time.thread_time()
            tracker.final(text)
            ovl.append((time.thread_time() - t) * 1000)
            # overlapped, but ASR revised the final after the last partial
            t = time.thread_time()
            tracker.final(text + " please")
            rev.append((time.thread_time() - t) * 1000)
    print("| final transcript -> understanding ready (1,000 payees; thread CPU time) | p50 | p99 |")
    print("| --- | --- | --- |")
    for name, xs in [
        ("sequential, first turn of a call (payee index built at the final)", first),
        ("sequential, later turn (index already built)", seq),
        ("overlapped with partials, final = last partial", ovl),
        ("overlapped with partials, final revised after the last partial", rev),
    ]:
        print(f"| {name} | {statistics.median(xs):.3f} ms | {pct(xs, 0.99):.3f} ms |")


def bench_end_of_turn(
    nlu: Understander, plist: list[Payee], base: int, short: int, long: int
) -> None:
    index = nlu.payee_index(plist)
    fixed = []
    adaptive = []
    prefixes = cut = 0
    for text in UTTERANCES:
        words = text.split()
        state = nlu.turn_completeness(text, payees=index)
        wait = {"complete": short, "incomplete": long}.get(state, base)
        fixed.append(base)
        adaptive.append(wait)
        for k in range(1, len(words)):
            prefixes += 1
            if nlu.turn_completeness(" ".join(words[:k]), payees=index) == "complete":
                cut += 1
    print()
    print(f"| adaptive end of turn (base {base} ms, short {short} ms, long {long} ms) | value |")
    print("| --- | --- |")
    print(f"| mean wait after the last word, fixed | {statistics.mean(fixed):.0f} ms |")
    print(f"| mean wait after the last word, adaptive | {statistics.mean(adaptive):.0f} ms |")
    complete = sum(1 for w in adaptive if w == short)
    print(f"| whole utterances judged complete | {complete}/{len(UTTERANCES)} |")
    print(f"| proper prefixes judged complete (cut-off risk on a pause) | {cut}/{prefixes} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-ms", type=int, default=600)
    ap.add_argument("--short-ms", type=int, default=250)
    ap.add_argument("--long-ms", type=int, default=900)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    nlu = Understander.load()
    plist = payees()
    bench_overlap(nlu, plist, args.rounds)
    bench_end_of_turn(nlu, plist, args.base_ms, args.short_ms, args.long_ms)


if __name__ == "__main__":
    main()
