"""The JSON report: counts, percentiles per stage per mode per concurrency level, the
calls-per-core figure and the decomposed / sequential latency ratio.

Percentiles use linear interpolation between order statistics (numpy's default), so
p50 <= p95 <= p99 always holds. Latencies are milliseconds from the end of speech.
Client stages are timed by the bots on arrival; server stages are the server's own
``turn.metrics``; both are kept, side by side.
"""

from __future__ import annotations

import platform
import subprocess
from collections import Counter
from typing import Any

import numpy as np

from clients.local_server import PROJECT_ROOT
from loadtest.bot import CALL_STATUSES, CLIENT_STAGES, TURN_STATUSES
from loadtest.runner import LevelResult, Mode

SERVER_STAGES = (
    "asr_first_partial",
    "asr_final",
    "understanding_ready",
    "llm_request",
    "llm_first_token",
    "llm_done",
    "response_first_delta",
    "response_done",
)
# A level passes when p95 of this stage is under the target and few turns failed.
TARGET_STAGE = "understanding"
MAX_FAILED_TURN_SHARE = 0.01
# Capacity is also reported at these targets, so a run shows the whole curve.
CAPACITY_TARGETS_MS = (500.0, 750.0, 1000.0, 1500.0, 2000.0)


def percentiles(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    data = np.asarray(values, dtype=float)
    p50, p95, p99 = np.percentile(data, [50, 95, 99])
    return {
        "n": len(values),
        "p50": round(float(p50), 1),
        "p95": round(float(p95), 1),
        "p99": round(float(p99), 1),
        "mean": round(float(data.mean()), 1),
        "min": round(float(data.min()), 1),
        "max": round(float(data.max()), 1),
    }


def _stage_table(turns: list[dict], key: str, stages: tuple[str, ...]) -> dict[str, Any]:
    ok = [t for t in turns if t["status"] == "ok"]
    return {s: percentiles([t[key][s] for t in ok if s in t[key]]) for s in stages}


def summarize_level(result: LevelResult) -> dict[str, Any]:
    calls = [c.to_dict() for c in result.calls]
    turns = [t for c in calls for t in c["turns"]]
    call_counts = Counter(c["status"] for c in calls)
    turn_counts = Counter(t["status"] for t in turns)
    ok = [t for t in turns if t["status"] == "ok"]
    failed = len(turns) - turn_counts["ok"]
    by_path: dict[str, Any] = {}
    for path in sorted({str(t["path"]) for t in ok if t["path"]}):
        chosen = [t for t in ok if str(t["path"]) == path]
        by_path[path] = _stage_table(chosen, "client_ms", tuple(CLIENT_STAGES))
    return {
        "mode": result.mode,
        "concurrency": result.concurrency,
        "duration_s": result.duration_s,
        "wall_s": result.wall_s,
        "calls": {"started": len(calls), **{s: call_counts[s] for s in CALL_STATUSES}},
        "turns": {
            "scripted": len(turns),
            **{s: turn_counts[s] for s in TURN_STATUSES},
            "failed_share": round(failed / len(turns), 4) if turns else None,
            "split": sum(t["split"] for t in turns),
            "intent_mismatch": sum(
                1 for t in ok if t["intent"] and t["intent"] != t["expected_intent"]
            ),
            "no_transcript": sum(1 for t in ok if not (t["transcript"] or "").strip()),
        },
        "errors": dict(Counter(e for c in calls for e in c["errors"])),
        "client_ms": _stage_table(turns, "client_ms", tuple(CLIENT_STAGES)),
        "server_ms": _stage_table(turns, "server_ms", SERVER_STAGES),
        "by_path": by_path,
        "by_audio": {
            audio: {
                "n": len(chosen),
                **{
                    f"{stage}_p50": percentiles(
                        [t["client_ms"][stage] for t in chosen if stage in t["client_ms"]]
                    ).get("p50")
                    for stage in ("speech_stopped", "understanding")
                },
                "transcripts": sorted({str(t["transcript"]) for t in chosen})[:3],
            }
            for audio in sorted({t["audio"] for t in ok})
            if (chosen := [t for t in ok if t["audio"] == audio])
        },
        "server_process": result.server_process,
        "loadgen": {
            "cpu_cores_avg": result.loadgen_cpu_cores,
            "pacing_lag_ms_max": max((c["pacing_lag_ms_max"] for c in calls), default=0.0),
            "late_frames": sum(c["late_frames"] for c in calls),
            "frames": sum(c["frames"] for c in calls),
        },
        "_turns": turns,  # popped into the top-level "turns" list by build_report
    }


def _passes(level: dict[str, Any], target_ms: float, p: str = "p95") -> bool:
    p95 = level["client_ms"][TARGET_STAGE].get(p)
    share = level["turns"]["failed_share"]
    return (
        p95 is not None
        and p95 <= target_ms
        and share is not None
        and (share <= MAX_FAILED_TURN_SHARE)
    )


def _capacity(levels: list[dict[str, Any]], target_ms: float, p: str = "p95") -> int:
    """Highest concurrency that meets the target with every lower level meeting it too."""
    best = 0
    for level in levels:
        if not _passes(level, target_ms, p):
            break
        best = level["concurrency"]
    return best


def _git_revision() -> str | None:
    """HEAD's short hash, with "+dirty" when the working tree (which is what the local
    servers run) differs from it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10
        )
        return done.stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) or None


def summarize(
    levels: list[dict[str, Any]], primary: str | None, *, target_ms: float, cores: int | None
) -> dict[str, Any]:
    """The headline figures from the per-level summaries (also re-run by
    ``python -m loadtest report`` to judge a stored run against another target)."""
    for level in levels:
        level["passes_target"] = _passes(level, target_ms)
    own = sorted((lv for lv in levels if lv["mode"] == primary), key=lambda lv: lv["concurrency"])
    best = _capacity(own, target_ms)
    floor = own[0]["client_ms"][TARGET_STAGE] if own else {}
    summary: dict[str, Any] = {
        "target": f"p95 end of speech -> {TARGET_STAGE} <= {target_ms:g} ms "
        f"and at most {MAX_FAILED_TURN_SHARE:.0%} of turns failed",
        "target_ms": target_ms,
        "mode": primary,
        "max_concurrency_under_target": best,
        "cores": cores,
        "calls_per_core": round(best / cores, 2) if cores else None,
        "floor": {
            "concurrency": own[0]["concurrency"] if own else None,
            **{p: floor.get(p) for p in ("p50", "p95", "p99")},
        },
        "capacity": [
            {
                "target_ms": t,
                "max_concurrency": (n := _capacity(own, t)),
                "calls_per_core": round(n / cores, 2) if cores else None,
                # The same with the median instead of p95: where the typical turn stands.
                "max_concurrency_p50": (m := _capacity(own, t, "p50")),
                "calls_per_core_p50": round(m / cores, 2) if cores else None,
            }
            for t in sorted({target_ms, *CAPACITY_TARGETS_MS})
        ],
        "ratios": _ratios(levels),
    }
    return summary


def build_report(
    results: list[LevelResult],
    modes: list[Mode],
    *,
    target_ms: float,
    cores: int | None,
    command: str,
    options: dict[str, Any],
) -> dict[str, Any]:
    levels = [summarize_level(r) for r in results]
    turns: list[dict[str, Any]] = []
    for level in levels:
        for turn in level.pop("_turns"):
            turns.append({"mode": level["mode"], "concurrency": level["concurrency"], **turn})
    primary = modes[0].name if modes else None
    summary = summarize(levels, primary, target_ms=target_ms, cores=cores)
    return {
        "report": "loadtest",
        "version": 1,
        "command": command,
        "options": options,
        "machine": {
            "cores": cores,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "git_revision": _git_revision(),
        },
        "modes": [
            {"name": m.name, "flags": list(m.flags), "url": m.url, "note": m.note} for m in modes
        ],
        "summary": summary,
        "levels": levels,
        "turns": turns,
    }


def _ratios(levels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """decomposed / sequential latency per level where both ran (under 1: decomposed is
    faster), for end of speech -> understanding and -> response done."""
    index = {(lv["mode"], lv["concurrency"]): lv for lv in levels}
    out = []
    for (mode, level), decomposed in sorted(index.items(), key=lambda kv: kv[0][1]):
        sequential = index.get(("sequential", level))
        if mode != "decomposed" or sequential is None:
            continue
        row: dict[str, Any] = {"concurrency": level}
        for stage in ("understanding", "response_done"):
            for p in ("p50", "p95"):
                a = decomposed["client_ms"][stage].get(p)
                b = sequential["client_ms"][stage].get(p)
                row[f"{stage}_{p}_ratio"] = round(a / b, 3) if a is not None and b else None
                row[f"{stage}_{p}_ms"] = {"decomposed": a, "sequential": b}
        out.append(row)
    return out
