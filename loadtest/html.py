"""The HTML report: one self-contained file, plots drawn as inline SVG (no plotting
library to install), built from the JSON report alone.

Plots: p50/p95 end of speech -> understanding against concurrency (with the target),
its CDF per mode and level, stacked per-stage medians from the caller's side, and
server CPU against concurrency. Tables below give every number the plots use.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loadtest.bot import CLIENT_STAGES

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
MODE_DASH = {"decomposed": "", "sequential": "6 4"}
# Caller-side stages as consecutive segments of the time after the end of speech.
SEGMENTS = (
    ("endpointing", None, "speech_stopped", "#9ecae1"),
    ("ASR final", "speech_stopped", "final_transcript", "#3182bd"),
    ("understanding", "final_transcript", "understanding", "#31a354"),
    ("first reply phrase", "understanding", "first_response_delta", "#fd8d3c"),
    ("rest of reply", "first_response_delta", "response_done", "#e6550d"),
)
W, H = 720, 330
LEFT, RIGHT, TOP, BOTTOM = 64, 200, 28, 44


def _e(value: Any) -> str:
    return html.escape(str(value))


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first, last = math.floor(low / step), math.ceil(high / step)
    return [round(i * step, 6) for i in range(first, last + 1)]


class Chart:
    """A minimal x/y chart: axes, grid, polylines, bars, a legend."""

    def __init__(
        self,
        title: str,
        xlabel: str,
        ylabel: str,
        xr: tuple,
        yr: tuple,
        categories: Sequence[str] | None = None,
    ) -> None:
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.yticks = _nice_ticks(*yr)
        self.y0, self.y1 = self.yticks[0], self.yticks[-1]
        self.xtick_labels: dict[float, str] | None = None
        if categories is not None:  # category i is centred on x = i
            self.xticks = [float(i) for i in range(len(categories))]
            self.x0, self.x1 = -0.5, len(categories) - 0.5
            self.xtick_labels = {float(i): c for i, c in enumerate(categories)}
        else:
            self.xticks = _nice_ticks(*xr)
            self.x0, self.x1 = self.xticks[0], self.xticks[-1]
        self.body: list[str] = []
        self.legend: list[tuple[str, str, str, bool]] = []

    def x(self, value: float) -> float:
        return LEFT + (value - self.x0) / (self.x1 - self.x0 or 1) * (W - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return H - BOTTOM - (value - self.y0) / (self.y1 - self.y0 or 1) * (H - TOP - BOTTOM)

    def line(
        self,
        points: Sequence[tuple[float, float]],
        color: str,
        label: str,
        dash: str = "",
        marker: bool = False,
    ) -> None:
        if not points:
            return
        path = " ".join(f"{self.x(px):.1f},{self.y(py):.1f}" for px, py in points)
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self.body.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2"{dashed} points="{path}"/>'
        )
        if marker:
            for px, py in points:
                self.body.append(
                    f'<circle cx="{self.x(px):.1f}" cy="{self.y(py):.1f}" r="3" fill="{color}">'
                    f"<title>{_e(label)}: {py:g}</title></circle>"
                )
        self.legend.append((label, color, dash, False))

    def hline(self, value: float, label: str, color: str = "#555") -> None:
        y = self.y(value)
        self.body.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" '
            f'stroke-dasharray="2 3"/><text x="{W - RIGHT - 4}" y="{y - 4:.1f}" '
            f'text-anchor="end" font-size="11" fill="{color}">{_e(label)}</text>'
        )

    def svg(self) -> str:
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">',
            f'<rect width="{W}" height="{H}" fill="white"/>',
            f'<text x="{LEFT}" y="13" font-size="13" font-weight="bold">{_e(self.title)}</text>',
        ]
        for tick in self.yticks:
            y = self.y(tick)
            parts.append(
                f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}</text>'
            )
        labels = self.xtick_labels or {t: f"{t:g}" for t in self.xticks}
        for tick, text in labels.items():
            x = self.x(tick)
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{H - BOTTOM}" y2="{H - BOTTOM + 4}" '
                f'stroke="#333"/><text x="{x:.1f}" y="{H - BOTTOM + 16}" '
                f'text-anchor="middle">{_e(text)}</text>'
            )
        parts.append(
            f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" '
            'fill="none" stroke="#333"/>'
        )
        parts.append(
            f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" text-anchor="middle">'
            f"{_e(self.xlabel)}</text>"
            f'<text transform="translate(14 {(TOP + H - BOTTOM) / 2}) rotate(-90)" '
            f'text-anchor="middle">{_e(self.ylabel)}</text>'
        )
        parts.extend(self.body)
        for i, (label, color, dash, box) in enumerate(self.legend):
            y = TOP + 8 + i * 16
            x = W - RIGHT + 10
            if box:
                parts.append(f'<rect x="{x}" y="{y - 8}" width="18" height="10" fill="{color}"/>')
            else:
                dashed = f' stroke-dasharray="{dash}"' if dash else ""
                parts.append(
                    f'<line x1="{x}" x2="{x + 18}" y1="{y - 3}" y2="{y - 3}" stroke="{color}" '
                    f'stroke-width="2"{dashed}/>'
                )
            parts.append(f'<text x="{x + 24}" y="{y}">{_e(label)}</text>')
        parts.append("</svg>")
        return "\n".join(parts)


def _levels(report: dict, mode: str) -> list[dict]:
    return sorted(
        (lv for lv in report["levels"] if lv["mode"] == mode), key=lambda lv: lv["concurrency"]
    )


def _modes(report: dict) -> list[str]:
    return list(dict.fromkeys(lv["mode"] for lv in report["levels"]))


def _stat(level: dict, stage: str, p: str) -> float | None:
    return level["client_ms"].get(stage, {}).get(p)


def latency_vs_concurrency(report: dict, stage: str = "understanding") -> str:
    concurrencies = sorted({lv["concurrency"] for lv in report["levels"]})
    # Levels are placed at equal spacing (1, 5, 10, 20, 40 would crowd on a linear axis).
    position = {c: i for i, c in enumerate(concurrencies)}
    values = [
        v
        for lv in report["levels"]
        for p in ("p50", "p95")
        if (v := _stat(lv, stage, p)) is not None
    ]
    target = report["summary"]["target_ms"]
    chart = Chart(
        f"end of speech -> {stage}, p50 and p95",
        "concurrent calls",
        "ms",
        (0, 1),
        (0, max([*values, target]) * 1.1),
        categories=[str(c) for c in concurrencies],
    )
    for i, mode in enumerate(_modes(report)):
        for p, width in (("p50", ""), ("p95", "")):
            points = [
                (position[lv["concurrency"]], v)
                for lv in _levels(report, mode)
                if (v := _stat(lv, stage, p)) is not None
            ]
            color = PALETTE[i % len(PALETTE)] if p == "p95" else _lighter(PALETTE[i % len(PALETTE)])
            chart.line(points, color, f"{mode} {p}", MODE_DASH.get(mode, width), marker=True)
    chart.hline(target, f"target {target:g} ms")
    return chart.svg()


def _lighter(color: str) -> str:
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{(c + 255) // 2:02x}" for c in (r, g, b))


def cdf(report: dict, stage: str = "understanding") -> str:
    groups: dict[tuple[str, int], list[float]] = {}
    for turn in report["turns"]:
        if turn["status"] == "ok" and stage in turn["client_ms"]:
            groups.setdefault((turn["mode"], turn["concurrency"]), []).append(
                turn["client_ms"][stage]
            )
    values = [v for vs in groups.values() for v in vs]
    high = float(np.percentile(values, 99.5)) * 1.05 if values else 1000.0
    chart = Chart(
        f"CDF of end of speech -> {stage}",
        "ms",
        "share of turns",
        (min([0.0, *values]), high),
        (0, 1),
    )
    concurrencies = sorted({c for _, c in groups})
    for (mode, level), data in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        data = sorted(data)
        n = len(data)
        points = []
        for i, v in enumerate(data):  # a step function: the empirical CDF
            x = min(v, chart.x1)
            points += [(x, i / n), (x, (i + 1) / n)]
        color = PALETTE[concurrencies.index(level) % len(PALETTE)]
        chart.line(points, color, f"{mode} x{level} (n={n})", MODE_DASH.get(mode, "3 2"))
    chart.hline(0.95, "p95", "#999")
    return chart.svg()


def stage_medians(report: dict) -> dict[tuple[str, int], dict[str, float]]:
    """Median of each caller-side segment per (mode, level)."""
    out: dict[tuple[str, int], dict[str, list[float]]] = {}
    for turn in report["turns"]:
        if turn["status"] != "ok":
            continue
        ms = turn["client_ms"]
        row = out.setdefault((turn["mode"], turn["concurrency"]), {})
        for name, start, end, _ in SEGMENTS:
            if end in ms and (start is None or start in ms):
                row.setdefault(name, []).append(ms[end] - (ms[start] if start else 0.0))
    return {key: {name: float(np.median(v)) for name, v in row.items()} for key, row in out.items()}


def stacked_bars(report: dict) -> str:
    medians = stage_medians(report)
    keys = sorted(medians, key=lambda k: (k[1], _modes(report).index(k[0])))
    totals = [sum(max(v, 0) for v in medians[k].values()) for k in keys] or [1.0]
    chart = Chart(
        "median time per stage after the end of speech",
        "mode x concurrent calls",
        "ms",
        (0, 1),
        (0, max(totals) * 1.1),
        categories=[f"{k[0][:3]} x{k[1]}" for k in keys],
    )
    step = chart.x(1) - chart.x(0)
    for i, key in enumerate(keys):
        bottom = 0.0
        for name, _, _, color in SEGMENTS:
            value = max(medians[key].get(name, 0.0), 0.0)
            if value <= 0:
                continue
            y_top, y_bottom = chart.y(bottom + value), chart.y(bottom)
            chart.body.append(
                f'<rect x="{chart.x(i) - step * 0.35:.1f}" y="{y_top:.1f}" '
                f'width="{step * 0.7:.1f}" height="{y_bottom - y_top:.1f}" fill="{color}">'
                f"<title>{_e(key[0])} x{key[1]} {_e(name)}: {value:.0f} ms</title></rect>"
            )
            bottom += value
    for name, _, _, color in SEGMENTS:
        chart.legend.append((name, color, "", True))
    return chart.svg()


def cpu_vs_concurrency(report: dict) -> str | None:
    rows = [lv for lv in report["levels"] if lv["server_process"].get("cpu_cores_avg")]
    if not rows:
        return None
    concurrencies = sorted({lv["concurrency"] for lv in rows})
    position = {c: i for i, c in enumerate(concurrencies)}
    peak = max(lv["server_process"].get("cpu_cores_peak") or 0 for lv in rows)
    cores = report["machine"].get("cores") or 0
    chart = Chart(
        "server CPU (cores busy, from /proc)",
        "concurrent calls",
        "cores",
        (0, 1),
        (0, max(peak, cores, 0.1) * 1.1),
        categories=[str(c) for c in concurrencies],
    )
    for i, mode in enumerate(_modes(report)):
        levels = [lv for lv in _levels(report, mode) if lv in rows]
        for key, suffix in (("cpu_cores_avg", "avg"), ("cpu_cores_peak", "peak")):
            points = [
                (position[lv["concurrency"]], lv["server_process"][key])
                for lv in levels
                if lv["server_process"].get(key) is not None
            ]
            color = PALETTE[i] if suffix == "avg" else _lighter(PALETTE[i])
            chart.line(points, color, f"{mode} {suffix}", MODE_DASH.get(mode, ""), marker=True)
    if cores:
        chart.hline(cores, f"{cores} cores")
    return chart.svg()


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e('' if c is None else c)}</td>" for c in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pct(stats: dict) -> str:
    if not stats.get("n"):
        return "-"
    return f"{stats['p50']:.0f} / {stats['p95']:.0f} / {stats['p99']:.0f}"


def render(report: dict) -> str:
    summary = report["summary"]
    cards = [
        ("calls per core", summary.get("calls_per_core")),
        ("max concurrent calls under target", summary.get("max_concurrency_under_target")),
        ("server cores", summary.get("cores")),
    ]
    floor = summary.get("floor") or {}
    if floor.get("p95") is not None:
        cards.append(
            (
                f"p50 / p95 end of speech -> understanding at {floor['concurrency']} call(s), ms",
                f"{floor['p50']:.0f} / {floor['p95']:.0f}",
            )
        )
    ratios = summary.get("ratios") or []
    if ratios:
        first = ratios[0]
        cards.append(
            (
                f"decomposed / sequential, p50 end of speech -> understanding "
                f"at {first['concurrency']} calls",
                first.get("understanding_p50_ratio"),
            )
        )
    card_html = "".join(
        f'<div class="card"><div class="v">{_e("-" if v is None else v)}</div>'
        f'<div class="k">{_e(k)}</div></div>'
        for k, v in cards
    )
    plots = [latency_vs_concurrency(report), cdf(report), stacked_bars(report)]
    cpu = cpu_vs_concurrency(report)
    if cpu:
        plots.append(cpu)
    stage_names = list(CLIENT_STAGES)
    level_rows = []
    for lv in report["levels"]:
        proc = lv["server_process"]
        level_rows.append(
            [
                lv["mode"],
                lv["concurrency"],
                lv["calls"]["started"],
                f"{lv['turns']['ok']}/{lv['turns']['scripted']}",
                ", ".join(
                    f"{s} {lv['turns'][s]}"
                    for s in ("timeout", "error", "dropped", "rejected", "cancelled")
                    if lv["turns"][s]
                )
                or "-",
                *(_pct(lv["client_ms"][s]) for s in stage_names),
                "yes" if lv.get("passes_target") else "no",
                proc.get("cpu_cores_avg"),
                proc.get("rss_mib_peak"),
                lv["loadgen"]["pacing_lag_ms_max"],
            ]
        )
    server_stages = [s for s in report["levels"][0]["server_ms"]] if report["levels"] else []
    server_stages = [
        s for s in server_stages if any(lv["server_ms"][s].get("n") for lv in report["levels"])
    ]
    server_rows = [
        [lv["mode"], lv["concurrency"], *(_pct(lv["server_ms"][s]) for s in server_stages)]
        for lv in report["levels"]
    ]
    ratio_rows = [
        [
            r["concurrency"],
            r.get("understanding_p50_ratio"),
            r.get("understanding_p95_ratio"),
            r.get("response_done_p50_ratio"),
            r.get("response_done_p95_ratio"),
        ]
        for r in ratios
    ]
    path_rows = [
        [lv["mode"], lv["concurrency"], path, _pct(table["understanding"])]
        for lv in report["levels"]
        for path, table in lv["by_path"].items()
    ]
    capacity_rows = [
        [
            c["target_ms"],
            c["max_concurrency"],
            c["calls_per_core"],
            c.get("max_concurrency_p50"),
            c.get("calls_per_core_p50"),
        ]
        for c in summary.get("capacity") or []
    ]
    audio_rows = []
    for mode in _modes(report):
        levels = _levels(report, mode)
        if not levels:
            continue
        for audio, row in levels[0]["by_audio"].items():
            audio_rows.append(
                [
                    mode,
                    levels[0]["concurrency"],
                    audio,
                    row["n"],
                    row.get("speech_stopped_p50"),
                    row.get("understanding_p50"),
                    " | ".join(row.get("transcripts") or []),
                ]
            )
    modes = "".join(
        f"<li><b>{_e(m['name'])}</b>: <code>{_e(' '.join(m['flags']) or m['url'])}</code> "
        f"- {_e(m['note'])}</li>"
        for m in report["modes"]
    )
    machine = report["machine"]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Load test report</title>
<style>
body {{ font-family: sans-serif; margin: 24px; max-width: 1400px; color: #222; }}
.cards {{ display: flex; gap: 16px; flex-wrap: wrap; }}
.card {{ border: 1px solid #ccc; border-radius: 6px; padding: 10px 16px; min-width: 160px; }}
.card .v {{ font-size: 28px; font-weight: bold; }} .card .k {{ color: #555; max-width: 260px; }}
.plots {{ display: flex; flex-wrap: wrap; gap: 12px; }}
table {{ border-collapse: collapse; margin: 8px 0 20px; font-size: 13px; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}
th {{ background: #f4f4f4; }} code {{ background: #f4f4f4; }}
</style></head><body>
<h1>Load test report</h1>
<p><code>{_e(report["command"])}</code><br>
{_e(machine.get("platform"))}, {_e(machine.get("cores"))} cores, Python {_e(machine.get("python"))},
git {_e(machine.get("git_revision"))}</p>
<div class="cards">{card_html}</div>
<p>Target: {_e(summary["target"])}. Calls per core = highest concurrency meeting it (every
lower level meeting it too) / server cores. Latencies are measured by the bots from the
moment the frame holding the last speech sample was sent.</p>
<h2>Modes</h2><ul>{modes}</ul>
<h2>Plots</h2><div class="plots">{"".join(plots)}</div>
<h2>Caller side, ms from end of speech (p50 / p95 / p99)</h2>
{
        _table(
            [
                "mode",
                "calls",
                "started",
                "turns ok",
                "failed",
                *stage_names,
                "meets target",
                "server CPU cores",
                "server RSS MiB",
                "max pacing lag ms",
            ],
            level_rows,
        )
    }
<h2>Server's own stage timings (turn.metrics), ms from its end of speech (p50 / p95 / p99)</h2>
{_table(["mode", "calls", *server_stages], server_rows)}
<h2>Capacity at other targets (end of speech -> understanding)</h2>
{
        _table(
            [
                "target ms",
                "max calls (p95)",
                "calls per core (p95)",
                "max calls (p50)",
                "calls per core (p50)",
            ],
            capacity_rows,
        )
    }
<h2>Decomposed / sequential latency ratio (under 1: decomposed is faster)</h2>
{
        _table(
            ["calls", "understanding p50", "understanding p95", "done p50", "done p95"],
            ratio_rows,
        )
        if ratio_rows
        else "<p>No sequential baseline in this run.</p>"
    }
<h2>By understanding path (fast / llm), end of speech -> understanding</h2>
{_table(["mode", "calls", "path", "p50 / p95 / p99"], path_rows)}
<h2>Per utterance at the lowest level (median ms from end of speech)</h2>
<p>The end-of-turn silence the server chose shows in <i>speech_stopped</i>; a slow
<i>understanding</i> after it is the final transcript (e.g. a Whisper confirmation).</p>
{
        _table(
            ["mode", "calls", "audio", "turns", "speech_stopped", "understanding", "transcripts"],
            audio_rows,
        )
    }
</body></html>
"""


def write_html(report: dict, path: Path) -> None:
    path.write_text(render(report))
