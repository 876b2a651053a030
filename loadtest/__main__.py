"""Load test: ``python -m loadtest run --calls N --duration S [--url ws://...]``.

    python -m loadtest run --calls 5 --duration 30
    python -m loadtest run --sweep 1,5,10,20,40 --duration 30 --target-ms 500
    python -m loadtest run --calls 10 --duration 60 --url ws://10.0.0.5:8765

With no ``--url`` it starts the server itself (``python -m agent serve`` on a free
loopback port), and a second one for the sequential baseline, and stops them at the end.
With ``--url`` it talks to that server only (and ``--baseline-url`` for a sequential
one). Writes ``report.json`` and ``report.html`` under ``--out``
(default ``var/loadtest/<UTC time>/``) and prints the summary.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import time
from pathlib import Path

import orjson

from clients.local_server import PROJECT_ROOT
from loadtest.bot import BotOptions
from loadtest.conversations import SCRIPTS
from loadtest.report import build_report
from loadtest.runner import LevelOptions, Mode, RunPlan, execute, local_modes


def _levels(text: str) -> list[int]:
    try:
        levels = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,5,10; got {text!r}") from None
    if not levels or levels[0] < 1:
        raise argparse.ArgumentTypeError("concurrency levels must be >= 1")
    return levels


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        help="run the bots and write the report",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    run.add_argument("--calls", type=int, default=5, help="concurrent calls (one level)")
    run.add_argument(
        "--sweep", type=_levels, default=None, help="concurrency levels, e.g. 1,5,10,20,40"
    )
    run.add_argument("--duration", type=float, default=30.0, help="seconds of new calls per level")
    run.add_argument("--url", default=None, help="server to call (default: start one locally)")
    run.add_argument(
        "--baseline-url", default=None, help="with --url: a server running the sequential mode"
    )
    run.add_argument(
        "--no-baseline", action="store_true", help="skip the sequential baseline server"
    )
    run.add_argument(
        "--server-pid",
        type=int,
        default=None,
        help="with --url: pid of that server when it runs on this machine (CPU and memory "
        "from /proc); --baseline-pid likewise",
    )
    run.add_argument("--baseline-pid", type=int, default=None, help=argparse.SUPPRESS)
    run.add_argument(
        "--llm-url",
        default=None,
        help="an LLM server (SGLang, OpenAI-compatible): adds a third local server, "
        "decomposed with --llm.base_url URL, for the fast path vs LLM path comparison",
    )
    run.add_argument(
        "--server-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra flag for the local servers, e.g. --server-flag=--asr.whisper_confirm "
        "--server-flag=never (repeatable)",
    )
    run.add_argument("--target-ms", type=float, default=500.0, help="p95 target for the sweep")
    run.add_argument(
        "--keep-going",
        action="store_true",
        help="sweep every level, even past one where the server is overloaded "
        "(p95 over 5x the target or over 10%% of turns failed)",
    )
    run.add_argument(
        "--cores",
        type=int,
        default=None,
        help="server cores for calls-per-core (default: this machine's, when local)",
    )
    run.add_argument("--jitter", type=float, default=2.0, help="max arrival delay per caller (s)")
    run.add_argument(
        "--grace", type=float, default=45.0, help="after --duration, calls may finish this long"
    )
    run.add_argument("--max-calls", type=int, default=None, help="cap on calls per level")
    run.add_argument(
        "--min-turns",
        type=int,
        default=0,
        help="keep a level going past --duration (up to 4x) until this many turns were made",
    )
    run.add_argument("--turn-timeout", type=float, default=15.0, help="seconds for a reply")
    run.add_argument(
        "--conversations",
        default=None,
        help=f"comma-separated scripts (default all): {','.join(SCRIPTS)}",
    )
    run.add_argument("--warmup", type=int, default=1, help="unrecorded calls per server first")
    run.add_argument("--seed", type=int, default=0, help="random seed for arrivals and scripts")
    run.add_argument("--customer", default="cust-001", help="customer the bots call as")
    run.add_argument(
        "--token",
        default=None,
        help="session token for --customer (python -m agent token); default: a development "
        "token signed with the local configuration's secret",
    )
    run.add_argument("--out", type=Path, default=None, help="report folder")
    run.add_argument("--no-html", action="store_true", help="JSON report only")
    again = commands.add_parser(
        "report",
        help="recompute the summary of a stored report.json (e.g. for another target) "
        "and rewrite its HTML",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    again.add_argument("path", type=Path, help="a report.json or the folder holding it")
    again.add_argument("--target-ms", type=float, default=None, help="default: the run's")
    return parser


def _token(args: argparse.Namespace) -> str | None:
    if args.token:
        return args.token
    try:
        from clients.call import dev_token
    except ImportError:  # a server without signed tokens
        return None
    return dev_token(args.customer)


def _modes(args: argparse.Namespace, out: Path) -> list[Mode]:
    if args.url:
        modes = [
            Mode("decomposed", url=args.url, note="given by --url", server_pid=args.server_pid)
        ]
        if args.baseline_url and not args.no_baseline:
            note = "given by --baseline-url"
            modes.append(
                Mode("sequential", url=args.baseline_url, note=note, server_pid=args.baseline_pid)
            )
        return modes
    return local_modes(
        not args.no_baseline,
        tuple(args.server_flag),
        bank_dir=(out / "bank").resolve(),
        llm_url=args.llm_url,
    )


def rereport(path: Path, target_ms: float | None) -> int:
    from loadtest.html import write_html
    from loadtest.report import summarize

    file = path / "report.json" if path.is_dir() else path
    report = orjson.loads(file.read_bytes())
    target = target_ms if target_ms is not None else report["summary"]["target_ms"]
    primary = report["modes"][0]["name"] if report["modes"] else None
    report["summary"] = summarize(
        report["levels"], primary, target_ms=target, cores=report["machine"]["cores"]
    )
    file.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    write_html(report, file.with_name("report.html"))
    print(orjson.dumps(_headline(report), option=orjson.OPT_INDENT_2).decode())
    print(f"report: {file} and {file.with_name('report.html')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "report":
        return rereport(args.path, args.target_ms)
    levels = args.sweep or [args.calls]
    if levels[0] < 1:
        print("--calls must be >= 1", file=sys.stderr)
        return 2
    out = args.out or PROJECT_ROOT / "var" / "loadtest" / time.strftime(
        "%Y%m%dT%H%M%SZ", time.gmtime()
    )
    (out / "bank").mkdir(parents=True, exist_ok=True)
    modes = _modes(args, out)
    bot = BotOptions(
        turn_timeout_s=args.turn_timeout, customer_id=args.customer, token=_token(args)
    )
    options = LevelOptions(
        duration_s=args.duration,
        jitter_s=args.jitter,
        grace_s=args.grace,
        max_calls=args.max_calls,
        min_turns=args.min_turns,
        bot=bot,
    )
    plan = RunPlan(
        levels=levels,
        modes=modes,
        options=options,
        conversation_names=args.conversations.split(",") if args.conversations else None,
        warmup_calls=args.warmup,
        seed=args.seed,
        stop_p95_ms=None if args.keep_going else 5 * args.target_ms,
    )
    local = not args.url or args.server_pid is not None
    cores = args.cores or (len(os.sched_getaffinity(0)) if local else None)
    try:
        import uvloop

        results = uvloop.run(execute(plan, log=lambda m: print(m, file=sys.stderr, flush=True)))
    except ImportError:
        results = asyncio.run(execute(plan))
    words = list(sys.argv[1:] if argv is None else argv)
    for i, word in enumerate(words):  # a token is a credential: keep it out of the report
        if word.startswith("--token="):
            words[i] = "--token=<redacted>"
        elif i and words[i - 1] == "--token":
            words[i] = "<redacted>"
    command = "python -m loadtest " + shlex.join(words)
    report = build_report(
        results,
        modes,
        target_ms=args.target_ms,
        cores=cores,
        command=command,
        options={
            "levels": levels,
            "duration_s": args.duration,
            "min_turns": args.min_turns,
            "jitter_s": args.jitter,
            "grace_s": args.grace,
            "turn_timeout_s": args.turn_timeout,
            "seed": args.seed,
            "conversations": args.conversations.split(",") if args.conversations else list(SCRIPTS),
        },
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    if not args.no_html:
        from loadtest.html import write_html

        write_html(report, out / "report.html")
    print(orjson.dumps(_headline(report), option=orjson.OPT_INDENT_2).decode())
    print(
        f"report: {out / 'report.json'}" + ("" if args.no_html else f" and {out / 'report.html'}")
    )
    return 0


def _headline(report: dict) -> dict:
    rows = []
    for level in report["levels"]:
        understanding = level["client_ms"]["understanding"]
        rows.append(
            {
                "mode": level["mode"],
                "calls": level["concurrency"],
                "turns": f"{level['turns']['ok']}/{level['turns']['scripted']} ok",
                "speech_end_to_understanding_ms": {
                    k: understanding.get(k) for k in ("p50", "p95", "p99")
                },
                "server_cpu_cores": level["server_process"].get("cpu_cores_avg"),
            }
        )
    return {"summary": report["summary"], "levels": rows}


if __name__ == "__main__":
    sys.exit(main())
