"""Load-test bots and latency benchmarks."""
