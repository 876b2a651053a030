"""Run bots against servers: one concurrency level, a sweep, the baselines side by side.

A *level* is N bot slots for ``duration_s``: each slot waits a random arrival delay,
then puts scripted calls through one after another (a short random gap between them)
until the duration is over; calls in flight then finish, bounded by a hard deadline
after which they are cancelled and counted as such. So about N calls are in flight at
any moment, arrivals are spread out, and the run always stops by itself.

A *mode* is one server configuration. With no ``--url`` the runner starts each server
itself (``clients.local_server.LocalServer``, the real ``python -m agent serve``):

* ``decomposed`` - the defaults: understanding overlapped with the ASR partials,
  adaptive end of turn.
* ``sequential`` - the baseline: fixed end-of-turn silence (``--vad.adaptive false``)
  and, where the server has the switch, no work on partials
  (``--pipeline.overlap false``: understanding only after the final transcript).

Levels are run mode after mode (decomposed N, sequential N, then the next N), so both
modes see the same machine within a minute of each other and their ratio holds on a
noisy host. While a local server runs, its CPU time and memory are sampled from
``/proc/<pid>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.local_server import PROJECT_ROOT, LocalServer
from loadtest.bot import BotOptions, CallRecord, run_bot_call
from loadtest.conversations import Conversation, conversations

# --- server modes -------------------------------------------------------------------


@dataclass
class Mode:
    name: str
    flags: tuple[str, ...] = ()
    url: str | None = None  # given: a server someone else runs
    note: str = ""
    server: LocalServer | None = None
    server_pid: int | None = None  # a server on this machine started by someone else

    @property
    def pid(self) -> int | None:
        process = self.server.process if self.server else None
        return process.pid if process else self.server_pid


def serve_help() -> str:
    """``python -m agent serve --help`` of this checkout: which switches exist today."""
    done = subprocess.run(
        [sys.executable, "-m", "agent", "serve", "--help"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout


def local_modes(
    baseline: bool,
    extra_flags: tuple[str, ...] = (),
    bank_dir: Path | None = None,
    llm_url: str | None = None,
) -> list[Mode]:
    """The servers to start. Each gets its own fresh embedded bank under ``bank_dir``
    (bots move money: a run must neither touch the development bank nor let the two
    servers share one)."""
    help_text = serve_help()
    overlap = "--pipeline.overlap" in help_text

    def bank(name: str) -> tuple[str, ...]:
        if bank_dir is None or "--bank.path" not in help_text:
            return ()
        return ("--bank.path", str(bank_dir / f"{name}.sqlite3"))

    decomposed = ("--vad.adaptive", "true")
    if overlap:
        decomposed += ("--pipeline.overlap", "true")
    modes = [
        Mode(
            "decomposed",
            decomposed + bank("decomposed") + extra_flags,
            note="defaults: understanding overlapped with ASR partials, adaptive end of turn",
        )
    ]
    if baseline:
        sequential = ("--vad.adaptive", "false")
        note = "fixed end-of-turn silence (--vad.adaptive false)"
        if overlap:
            sequential += ("--pipeline.overlap", "false")
            note += "; no work on partials (--pipeline.overlap false)"
        else:
            note += "; this server has no --pipeline.overlap switch, so partials are still "
            note += "understood ahead (the baseline only loses adaptive endpointing)"
        modes.append(Mode("sequential", sequential + bank("sequential") + extra_flags, note=note))
    for mode in llm_modes(help_text, llm_url):
        mode.flags += bank(mode.name) + extra_flags
        modes.append(mode)
    return modes


def llm_modes(help_text: str, llm_url: str | None = None) -> list[Mode]:
    """The fast path vs LLM path comparison: a third server, decomposed, with an LLM.

    Only against a real LLM server (SGLang, or any OpenAI-compatible one) given by
    ``--llm-url``, and only when this server has the ``--llm.base_url`` option; no
    stand-in is ever used, so without both no mode is added. The report splits every
    mode's turns by the ``path`` field of the ``understanding`` event (``fast`` /
    ``llm``), so the LLM mode shows both paths side by side, and the decomposed mode
    without an LLM is its baseline. HOOK: if the server grows a switch that forces every
    turn through the LLM (for a pure LLM-path baseline), add a second mode here with it.
    """
    if not llm_url:
        return []
    if "--llm.base_url" not in help_text:
        raise SystemExit(
            "--llm-url given, but this server has no --llm.base_url option (agent serve --help)"
        )
    flags = ("--vad.adaptive", "true", "--llm.base_url", llm_url)
    if "--pipeline.overlap" in help_text:
        flags += ("--pipeline.overlap", "true")
    return [Mode("llm", flags, note=f"decomposed, LLM at {llm_url}")]


# --- /proc sampling -----------------------------------------------------------------


class ProcSampler:
    """CPU (all threads) and resident memory of one local process, from /proc/<pid>."""

    def __init__(self, pid: int, interval_s: float = 0.5) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.tick = os.sysconf("SC_CLK_TCK")
        self.samples: list[tuple[float, float, float]] = []  # (wall, cpu seconds, rss MiB)

    def read(self) -> tuple[float, float] | None:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / self.tick  # utime + stime
        rss = next(
            (int(line.split()[1]) / 1024 for line in status.splitlines() if line[:6] == "VmRSS:"),
            0.0,
        )
        return cpu, rss

    async def run(self) -> None:
        while True:
            got = self.read()
            if got:
                self.samples.append((time.monotonic(), *got))
            await asyncio.sleep(self.interval_s)

    def summary(self) -> dict[str, Any]:
        if len(self.samples) < 2:
            return {}
        (t0, c0, _), (t1, c1, _) = self.samples[0], self.samples[-1]
        rates = [
            (b[1] - a[1]) / (b[0] - a[0])
            for a, b in zip(self.samples, self.samples[1:], strict=False)
            if b[0] > a[0]
        ]
        return {
            "pid": self.pid,
            "cpu_cores_avg": round((c1 - c0) / (t1 - t0), 3),
            "cpu_cores_peak": round(max(rates), 3) if rates else None,
            "rss_mib_avg": round(sum(s[2] for s in self.samples) / len(self.samples), 1),
            "rss_mib_peak": round(max(s[2] for s in self.samples), 1),
            "samples": len(self.samples),
        }


def _self_cpu() -> float:
    times = os.times()
    return times.user + times.system


# --- one level ----------------------------------------------------------------------


@dataclass
class LevelOptions:
    duration_s: float = 30.0
    jitter_s: float = 2.0  # arrival delay of each slot: uniform in [0, jitter_s]
    gap_s: tuple[float, float] = (0.2, 1.5)  # between two calls of a slot
    grace_s: float = 45.0  # after duration_s: calls in flight may finish, then cancelled
    max_calls: int | None = None  # total calls started in the level
    # Keep starting calls past duration_s until this many turns were scripted (p95 needs
    # a few dozen samples), but never past 4 x duration_s.
    min_turns: int = 0
    bot: BotOptions = field(default_factory=BotOptions)


@dataclass
class LevelResult:
    mode: str
    concurrency: int
    duration_s: float
    wall_s: float
    calls: list[CallRecord]
    server_process: dict[str, Any]
    loadgen_cpu_cores: float


async def run_level(
    url: str,
    concurrency: int,
    scripts: list[Conversation],
    options: LevelOptions,
    *,
    mode: str = "target",
    pid: int | None = None,
    seed: int = 0,
) -> LevelResult:
    # Seeded by level, not by mode: every mode replays the same conversations in the
    # same order from each slot, so their latencies compare like with like.
    rng = random.Random(f"{seed}-{concurrency}")
    calls: list[CallRecord] = []
    began = time.monotonic()
    deadline = began + options.duration_s
    longest = began + options.duration_s * (4 if options.min_turns else 1)

    def more() -> bool:
        now = time.monotonic()
        if now >= longest:
            return False
        return now < deadline or sum(len(c.turns) for c in calls) < options.min_turns

    cpu0 = _self_cpu()

    async def slot(index: int) -> None:
        slot_rng = random.Random(rng.random())
        await asyncio.sleep(slot_rng.uniform(0, options.jitter_s))
        while more():
            if options.max_calls is not None and len(calls) >= options.max_calls:
                return
            record = CallRecord(
                call=len(calls),
                conversation="",
                started_at=round(time.monotonic() - began, 3),
            )
            conversation = slot_rng.choice(scripts)
            record.conversation = conversation.name
            calls.append(record)
            await run_bot_call(url, conversation, record, options.bot, slot_rng)
            await asyncio.sleep(slot_rng.uniform(*options.gap_s))

    sampler = ProcSampler(pid) if pid else None
    sampling = asyncio.create_task(sampler.run()) if sampler else None
    tasks = [asyncio.create_task(slot(i)) for i in range(concurrency)]
    hard_stop = (longest - began) + options.grace_s + options.jitter_s
    _done, pending = await asyncio.wait(tasks, timeout=hard_stop)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if sampling:
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
    wall = time.monotonic() - began
    return LevelResult(
        mode=mode,
        concurrency=concurrency,
        duration_s=options.duration_s,
        wall_s=round(wall, 3),
        calls=calls,
        server_process=sampler.summary() if sampler else {},
        loadgen_cpu_cores=round((_self_cpu() - cpu0) / wall, 3),
    )


# --- the whole run ------------------------------------------------------------------


@dataclass
class RunPlan:
    levels: list[int]
    modes: list[Mode]
    options: LevelOptions
    conversation_names: list[str] | None = None
    warmup_calls: int = 1
    seed: int = 0
    # Sweep: stop after a level where the first mode is overloaded - p95 of the target
    # stage over stop_p95_ms or more than stop_failed_share of its turns failed - since
    # higher levels would only be slower (and load a shared machine for nothing).
    stop_p95_ms: float | None = None
    stop_failed_share: float = 0.1
    target_stage: str = "understanding"


def _failed_share(result: LevelResult) -> float:
    turns = [t for c in result.calls for t in c.turns]
    return sum(t.status != "ok" for t in turns) / len(turns) if turns else 1.0


def _level_p95(result: LevelResult, stage: str) -> float | None:
    values = sorted(
        t.client_ms[stage]
        for c in result.calls
        for t in c.turns
        if t.status == "ok" and stage in t.client_ms
    )
    if not values:
        return None
    return values[min(len(values) - 1, int(0.95 * len(values)))]


async def execute(plan: RunPlan, log: Callable[[str], None] = print) -> list[LevelResult]:
    scripts = conversations(plan.conversation_names)
    results: list[LevelResult] = []
    for mode in plan.modes:
        if mode.url is None:
            max_calls = max(plan.levels) + 8
            mode.server = LocalServer(*mode.flags, "--server.max_calls", str(max_calls))
            log(f"starting {mode.name} server: python -m agent serve {' '.join(mode.flags)}")
            await asyncio.to_thread(mode.server.start)
            mode.url = mode.server.url
    try:
        for mode in plan.modes:
            assert mode.url
            for i in range(plan.warmup_calls):
                warm = CallRecord(call=-1 - i, conversation="warmup", started_at=0.0)
                await run_bot_call(
                    mode.url, scripts[i % len(scripts)], warm, plan.options.bot, random.Random(i)
                )
                log(f"warm-up call on {mode.name}: {warm.status}")
        for level in plan.levels:
            overloaded = False
            for mode in plan.modes:
                assert mode.url
                log(f"{mode.name}: {level} concurrent calls for {plan.options.duration_s:g} s")
                result = await run_level(
                    mode.url,
                    level,
                    scripts,
                    plan.options,
                    mode=mode.name,
                    pid=mode.pid,
                    seed=plan.seed,
                )
                results.append(result)
                p95 = _level_p95(result, plan.target_stage)
                turns = sum(len(c.turns) for c in result.calls)
                failed = _failed_share(result)
                log(
                    f"  {len(result.calls)} calls, {turns} turns ({failed:.0%} failed), "
                    f"p95 end of speech -> {plan.target_stage} {p95} ms"
                )
                if mode is plan.modes[0] and plan.stop_p95_ms is not None:
                    overloaded = (
                        p95 is None or p95 > plan.stop_p95_ms or failed > plan.stop_failed_share
                    )
                await asyncio.sleep(1.0)  # let the server drain between levels
            if overloaded and level != plan.levels[-1]:
                log(f"overloaded at {level} calls: the sweep stops here")
                break
    finally:
        for mode in plan.modes:
            if mode.server:
                await asyncio.to_thread(mode.server.stop)
    return results
