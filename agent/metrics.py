"""Prometheus metrics, served at /metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry()

ACTIVE_CALLS = Gauge("agent_active_calls", "Calls in progress", registry=REGISTRY)
CALLS = Counter("agent_calls_total", "Calls accepted", registry=REGISTRY)
REFUSED = Counter(
    "agent_calls_refused_total", "Calls refused because the server was busy", registry=REGISTRY
)
ERRORS = Counter("agent_errors_total", "Error events sent, by code", ["code"], registry=REGISTRY)
TURNS = Counter("agent_turns_total", "Turns completed, by input", ["input"], registry=REGISTRY)
UNDERSTOOD = Counter(
    "agent_understanding_total",
    "Final understandings, by the path that settled them (fast or llm) and intent",
    ["path", "intent"],
    registry=REGISTRY,
)
STAGE_LATENCY = Histogram(
    "agent_stage_latency_seconds",
    "Time from the end of speech to each later stage of a turn",
    ["stage"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10),
    registry=REGISTRY,
)


def render() -> bytes:
    return generate_latest(REGISTRY)
