"""LLM benchmark: the phases a performance engineer runs, against any OpenAI-compatible
endpoint (SGLang on a GPU, the embedded llama-server on a CPU), with the agent's own
client and prompts.

    python -m loadtest.llm --base-url http://127.0.0.1:30000            # GPU defaults
    python -m loadtest.llm --base-url http://127.0.0.1:8081 --cpu       # small CPU run
    python -m loadtest.llm --embedded --cpu      # starts the cached llama-server itself

Phases (each prints a table; --out writes everything as JSON, --markdown as tables):

1. prompt length sweep: cold prompts of growing length (a nonce first defeats the prefix
   cache), fixed output length: TTFT grows with prefill, TPOT stays flat;
2. schema off/on: the agent's extraction prompt with and without the per-request
   json_schema: latency, and how often the output parses and passes validation;
3. prefix cache cold/warm: the same extraction prompt with a nonce at the very start
   (nothing reusable) and without (the fixed prefix is cached): TTFT and cached tokens;
4. concurrency 1..N: N streams at once, each sending back to back: TTFT/TPOT/total p50,
   p95, p99 and the aggregate output tokens/s;
5. routes: the fast-path-vs-LLM ratio over two corpora (the load-test utterances in
   tests/fixtures/speech and CLINC150's banking + credit-card validation set), with
   the fast path's own latency beside the LLM's for a sample of the turns routed to it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agent.llm import prompts
from agent.llm.client import LLMClient, LLMError, StreamStats
from agent.llm.extraction import InvalidExtraction, parse
from agent.qna.index import FAQIndex

CANDIDATES = [
    prompts.CandidateView("p-ken-sato", "Ken Sato"),
    prompts.CandidateView("p-ken-saito", "Ken Saito"),
    prompts.CandidateView("p-yuki-tanaka", "Yuki Tanaka"),
]
UTTERANCES = [
    "send five thousand yen to ken sato",
    "send the money to ken like last time",
    "pay yuki two thousand yen",
    "transfer three thousand yen to ken saito please",
    "I'd like to move ten thousand yen over to ken",
]
CONTEXT = ["last transfer: p-ken-saito (Ken Saito), 3000 JPY"]


def pct(values: Sequence[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(stats: Sequence[StreamStats]) -> dict[str, Any]:
    def col(name: str) -> list[float]:
        return [v for s in stats if (v := getattr(s, name)) is not None]

    out: dict[str, Any] = {"n": len(stats)}
    for name in ("ttft_ms", "tpot_ms", "total_ms"):
        values = col(name)
        out[name] = {
            f"p{p}": None if (v := pct(values, p)) is None else round(v, 1) for p in (50, 95, 99)
        }
    cached = [s.cached_tokens for s in stats if s.cached_tokens is not None]
    prompt = [s.prompt_tokens for s in stats if s.prompt_tokens is not None]
    out["cached_tokens_mean"] = round(statistics.mean(cached), 1) if cached else None
    out["prompt_tokens_mean"] = round(statistics.mean(prompt), 1) if prompt else None
    out["completion_tokens"] = sum(s.completion_tokens or s.chunks for s in stats)
    return out


@dataclass
class Bench:
    client: LLMClient
    repeats: int
    output_tokens: int
    ignore_eos: bool
    results: dict[str, Any] = field(default_factory=dict)

    async def one(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        response_format: dict[str, Any] | None = None,
        fixed_length: bool = False,
    ) -> tuple[str, StreamStats]:
        extra = {"ignore_eos": True} if fixed_length and self.ignore_eos else None
        async with self.client.stream(
            messages, max_tokens=max_tokens, response_format=response_format, extra=extra
        ) as stream:
            completion = await stream.complete()
        return completion.text, completion.stats

    # --- phases -----------------------------------------------------------------------

    async def prompt_sweep(self, lengths: Sequence[int]) -> None:
        passages = [f"Q: {p.question}\nA: {p.answer}" for p in FAQIndex.load().passages]
        rows = []
        for target in lengths:
            stats = []
            for _ in range(self.repeats):
                words: list[str] = []
                i = 0
                while len(" ".join(words)) < target * 4:  # ~4 characters per token
                    words.append(passages[i % len(passages)])
                    i += 1
                text = f"[{uuid.uuid4().hex}]\n" + "\n\n".join(words)[: target * 4]
                messages = [
                    {"role": "system", "content": text},
                    {"role": "user", "content": "Summarise the passages above in detail."},
                ]
                _, s = await self.one(messages, max_tokens=self.output_tokens, fixed_length=True)
                stats.append(s)
            row = {"target_tokens": target, **summary(stats)}
            rows.append(row)
            print_row("prompt sweep", row)
        self.results["prompt_sweep"] = rows

    async def schema(self) -> None:
        rows = []
        for mode in ("off", "on"):
            stats = []
            valid = 0
            for i in range(self.repeats):
                text = UTTERANCES[i % len(UTTERANCES)]
                messages = prompts.extraction_messages(text, CANDIDATES, CONTEXT)
                schema = prompts.extraction_schema([c.id for c in CANDIDATES])
                fmt = prompts.response_format(schema) if mode == "on" else None
                out, s = await self.one(messages, max_tokens=96, response_format=fmt)
                stats.append(s)
                with contextlib.suppress(InvalidExtraction):
                    parse(_json_part(out), schema, finish_reason=s.finish_reason)
                    valid += 1
            row = {"schema": mode, "valid": f"{valid}/{len(stats)}", **summary(stats)}
            rows.append(row)
            print_row("schema", row)
        self.results["schema"] = rows

    async def prefix_cache(self) -> None:
        rows = []
        schema = prompts.extraction_schema([c.id for c in CANDIDATES])
        fmt = prompts.response_format(schema)
        for mode in ("cold", "warm"):
            stats = []
            if mode == "warm":  # one request puts the prefix in the cache
                await self.one(
                    prompts.extraction_messages(UTTERANCES[0], CANDIDATES, CONTEXT),
                    max_tokens=96,
                    response_format=fmt,
                )
            for i in range(self.repeats):
                messages = prompts.extraction_messages(
                    UTTERANCES[i % len(UTTERANCES)] + f" ({i})", CANDIDATES, CONTEXT
                )
                if mode == "cold":
                    nonce = f"[{uuid.uuid4().hex}] "
                    messages[0] = {"role": "system", "content": nonce + messages[0]["content"]}
                _, s = await self.one(messages, max_tokens=96, response_format=fmt)
                stats.append(s)
            row = {"prefix": mode, **summary(stats)}
            rows.append(row)
            print_row("prefix cache", row)
        self.results["prefix_cache"] = rows

    async def concurrency(self, levels: Sequence[int], duration_s: float) -> None:
        rows = []
        schema = prompts.extraction_schema([c.id for c in CANDIDATES])
        fmt = prompts.response_format(schema)

        async def worker(n: int, until: float, out: list[StreamStats]) -> None:
            i = n
            while time.perf_counter() < until:
                messages = prompts.extraction_messages(
                    UTTERANCES[i % len(UTTERANCES)], CANDIDATES, CONTEXT
                )
                try:
                    _, s = await self.one(messages, max_tokens=96, response_format=fmt)
                    out.append(s)
                except LLMError:
                    pass
                i += 1

        for level in levels:
            stats: list[StreamStats] = []
            start = time.perf_counter()
            until = start + duration_s
            await asyncio.gather(*(worker(n, until, stats) for n in range(level)))
            elapsed = time.perf_counter() - start
            row = {"concurrency": level, **summary(stats)}
            row["requests_per_s"] = round(len(stats) / elapsed, 2)
            row["output_tokens_per_s"] = round(row["completion_tokens"] / elapsed, 1)
            rows.append(row)
            print_row("concurrency", row)
        self.results["concurrency"] = rows

    async def routes(self, sample: int) -> None:
        from agent.llm import LLMConfig, Router
        from agent.llm.router import llm_reason
        from agent.understanding import Understander

        payees, corpora = _route_corpora()
        cfg = LLMConfig(base_url="x", extraction_budget_ms=120_000, answer_budget_ms=120_000)
        router = Router(cfg, client=self.client)
        nlu = Understander.load()
        context = ["last transfer: p-ken-saito (Ken Saito), 3000 JPY"]
        # warm both prefixes first: the sample measures calls in steady state
        warm = "send five thousand yen to ken"
        await router.resolve(
            nlu.understand(warm, payees=payees),
            text=warm,
            candidates=payees,
            account_context=context,
        )
        _ = [d async for d in router.answer("how much does a convenience store atm charge")]
        rows = []
        for corpus, texts in corpora.items():
            routes: dict[str, int] = {}
            fast_ms: list[float] = []
            llm_stats: list[StreamStats] = []
            outcomes: dict[str, int] = {}
            tried = 0
            for text in texts:
                t = time.perf_counter()
                u = nlu.understand(text, payees=payees, default_currency="GBP")
                route = "fast"
                if u.intent == "faq":
                    hits = router.retrieve(text, topic=u.topic)
                    conf = hits[0].confidence if hits else 0.0
                    route = (
                        "faq_direct"
                        if conf >= cfg.faq_direct_score
                        else "faq_llm"
                        if conf >= cfg.faq_min_score
                        else "faq_none"
                    )
                elif llm_reason(u) is not None:
                    route = "llm_extraction"
                fast_ms.append((time.perf_counter() - t) * 1000)
                routes[route] = routes.get(route, 0) + 1
                if route in ("llm_extraction", "faq_llm") and tried < sample:
                    tried += 1
                    marks: dict[str, float] = {}
                    start = time.perf_counter()

                    def mark(name: str, marks: dict[str, float] = marks) -> None:
                        marks[name] = time.perf_counter()

                    if route == "llm_extraction":
                        # as the pipeline does: the lookup's candidates, not every payee
                        ids = [c["id"] for c in u.entities.get("recipient_candidates") or ()]
                        found = [p for i in ids for p in payees if p.id == i]
                        out = await router.resolve(
                            u, text=text, candidates=found, account_context=context, on_mark=mark
                        )
                        outcome = out.path if out.path == "llm" else str(out.trace[-1].value)
                    else:
                        _ = [d async for d in router.answer(text, topic=u.topic, on_mark=mark)]
                        outcome = "answered"
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
                    s = StreamStats(rid="", started=start)
                    s.first_token_at = marks.get("llm_first_token")
                    s.done_at = marks.get("llm_done", time.perf_counter())
                    llm_stats.append(s)
            n = len(texts)
            row = {
                "corpus": corpus,
                "n": n,
                **{
                    f"share_{k}": round(routes.get(k, 0) / n, 3)
                    for k in ("fast", "llm_extraction", "faq_direct", "faq_llm", "faq_none")
                },
                "fast_path_ms": {
                    f"p{p}": round(v, 2) for p in (50, 95, 99) if (v := pct(fast_ms, p)) is not None
                },
                "llm_sampled": summary(llm_stats),
                "llm_outcomes": outcomes,
            }
            rows.append(row)
            print(f"[routes] {orjson.dumps(row).decode()}", flush=True)
        self.results["routes"] = rows


def _route_corpora() -> tuple[list[Any], dict[str, list[str]]]:
    from agent.understanding import Payee

    root = Path(__file__).resolve().parents[1]
    seed = orjson.loads((root / "agent" / "bank" / "seed.json").read_bytes())
    payees = [Payee(p["id"], p["name"], p["kind"]) for p in seed["customers"][0]["payees"]]
    corpora = {
        "load-test utterances": [
            orjson.loads(line)["transcript"]
            for line in (root / "tests/fixtures/speech/transcripts.jsonl").read_text().splitlines()
            if line.strip()
        ],
        "CLINC150 banking+cards val": [
            orjson.loads(line)["text"]
            for name in ("clinc150_banking_val.jsonl", "clinc150_credit_cards_val.jsonl")
            for line in (root / "data/nlu/clinc150" / name).read_text().splitlines()
            if line.strip()
        ],
    }
    return payees, corpora


def _json_part(text: str) -> str:
    """Without a schema a model may wrap the object in prose or a code fence."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


def print_row(phase: str, row: dict[str, Any]) -> None:
    flat = {
        k: (f"{v['p50']}/{v['p95']}/{v['p99']}" if isinstance(v, dict) else v)
        for k, v in row.items()
    }
    print(f"[{phase}] " + "  ".join(f"{k}={v}" for k, v in flat.items()), flush=True)


def markdown(results: dict[str, Any]) -> str:
    """Tables for docs/BENCHMARKS.md (ms, p50 / p95 / p99)."""

    def ms(d: dict[str, Any]) -> str:
        return " / ".join("-" if d[p] is None else f"{d[p]:.0f}" for p in ("p50", "p95", "p99"))

    out = []
    meta = results.get("meta", {})
    out.append(
        f"Endpoint `{meta.get('base_url')}`, model `{meta.get('model')}`, "
        f"{meta.get('repeats')} requests per row, {meta.get('machine')}."
    )
    if rows := results.get("prompt_sweep"):
        out += [
            "",
            f"Prompt length sweep (cold prompts, {meta.get('output_tokens')} output tokens):",
            "",
            "| prompt tokens | TTFT ms | TPOT ms | total ms |",
            "| ---: | ---: | ---: | ---: |",
        ]
        out += [
            f"| {r['prompt_tokens_mean'] or r['target_tokens']} | {ms(r['ttft_ms'])} | "
            f"{ms(r['tpot_ms'])} | {ms(r['total_ms'])} |"
            for r in rows
        ]
    if rows := results.get("schema"):
        out += [
            "",
            "Extraction, schema off / on (warm prefix):",
            "",
            "| json_schema | valid | TTFT ms | TPOT ms | total ms | output tokens |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        out += [
            f"| {r['schema']} | {r['valid']} | {ms(r['ttft_ms'])} | {ms(r['tpot_ms'])} | "
            f"{ms(r['total_ms'])} | {r['completion_tokens']} |"
            for r in rows
        ]
    if rows := results.get("prefix_cache"):
        out += [
            "",
            "Prefix cache, extraction prompt cold (nonce first) / warm (stable prefix):",
            "",
            "| prefix | prompt tokens | cached tokens | TTFT ms | total ms |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        out += [
            f"| {r['prefix']} | {r['prompt_tokens_mean']} | {r['cached_tokens_mean']} | "
            f"{ms(r['ttft_ms'])} | {ms(r['total_ms'])} |"
            for r in rows
        ]
    if rows := results.get("concurrency"):
        out += [
            "",
            "Concurrency (extraction with schema, back to back per stream):",
            "",
            "| streams | requests | TTFT ms | TPOT ms | total ms | req/s | out tok/s |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        out += [
            f"| {r['concurrency']} | {r['n']} | {ms(r['ttft_ms'])} | {ms(r['tpot_ms'])} | "
            f"{ms(r['total_ms'])} | {r['requests_per_s']} | {r['output_tokens_per_s']} |"
            for r in rows
        ]
    if rows := results.get("routes"):
        out += [
            "",
            "Routes (fast path vs LLM; the LLM columns are a sample of the turns routed to "
            "it, warm prefix):",
            "",
            "| corpus | turns | fast | LLM extraction | FAQ direct | FAQ + LLM | FAQ none | "
            "fast path ms p50/p95 | LLM first token ms p50/p95 | LLM total ms p50/p95 (n) | "
            "LLM outcomes |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in rows:
            f = r["fast_path_ms"]
            llm = r["llm_sampled"]
            total = llm["total_ms"]
            first = llm["ttft_ms"]
            shares = " | ".join(
                f"{100 * r[k]:.1f}%"
                for k in (
                    "share_fast",
                    "share_llm_extraction",
                    "share_faq_direct",
                    "share_faq_llm",
                    "share_faq_none",
                )
            )
            out.append(
                f"| {r['corpus']} | {r['n']} | {shares} | {f.get('p50')} / {f.get('p95')} | "
                f"{first['p50']} / {first['p95']} | {total['p50']} / {total['p95']} ({llm['n']}) | "
                f"{', '.join(f'{k} {v}' for k, v in r['llm_outcomes'].items())} |"
            )
    return "\n".join(out) + "\n"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


async def run(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    client = LLMClient(
        base_url,
        model=args.model,
        first_token_timeout_s=args.timeout,
        idle_timeout_s=args.timeout,
        abort_endpoint=False,
        chat_template_kwargs={"enable_thinking": False} if args.thinking_kwarg else None,
    )
    bench = Bench(client, args.repeats, args.output_tokens, not args.no_ignore_eos)
    bench.results["meta"] = {
        "base_url": base_url,
        "model": args.model if not args.embedded else args.embedded_model,
        "repeats": args.repeats,
        "output_tokens": args.output_tokens,
        "machine": f"{platform.machine()}, {_cpus()} CPUs",
    }
    phases = set(args.phases.split(","))
    try:
        # one throwaway request: model load, first allocation
        await bench.one([{"role": "user", "content": "hi"}], max_tokens=4)
        if "sweep" in phases:
            await bench.prompt_sweep(_ints(args.lengths))
        if "schema" in phases:
            await bench.schema()
        if "prefix" in phases:
            await bench.prefix_cache()
        if "concurrency" in phases:
            await bench.concurrency(_ints(args.concurrency), args.duration)
        if "routes" in phases:
            await bench.routes(args.route_sample)
    finally:
        await client.aclose()
    return bench.results


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.llm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base-url", default="http://127.0.0.1:30000")
    parser.add_argument("--model", default="default")
    parser.add_argument(
        "--embedded", action="store_true", help="start the cached llama-server (scripts/setup_llm)"
    )
    parser.add_argument("--embedded-model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--cpu", action="store_true", help="small sizes for a CPU server")
    parser.add_argument("--phases", default="sweep,schema,prefix,concurrency,routes")
    parser.add_argument(
        "--route-sample", type=int, default=20, help="LLM-routed turns actually sent, per corpus"
    )
    parser.add_argument("--lengths", default="250,500,1000,2000,4000")
    parser.add_argument("--concurrency", default="1,2,4,8,16")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per level")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--no-ignore-eos", action="store_true")
    parser.add_argument(
        "--thinking-kwarg",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="send chat_template_kwargs.enable_thinking=false (Gemma 4, Qwen 3)",
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    parser.add_argument("--markdown", type=Path, help="write the tables as Markdown")
    args = parser.parse_args(argv)
    if args.cpu:
        defaults = parser.parse_args([])
        for name, value in {
            "lengths": "100,300,600,1200",
            "concurrency": "1,2,4",
            "duration": 20.0,
            "repeats": 5,
            "output_tokens": 24,
            "route_sample": 6,
        }.items():
            if getattr(args, name) == getattr(defaults, name):
                setattr(args, name, value)

    server = None
    base_url = args.base_url
    if args.embedded:
        from agent.llm.local import LlamaServer

        server = LlamaServer(args.embedded_model, context=8192).start()
        base_url = server.base_url
    try:
        results = asyncio.run(run(args, base_url))
    finally:
        if server is not None:
            server.stop()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    table = markdown(results)
    if args.markdown:
        args.markdown.write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
