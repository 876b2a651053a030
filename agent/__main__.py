"""Command line.

``python -m agent serve [--config FILE] [--section.key VALUE ...]`` starts the server;
``python -m agent token --customer cust-001 [--ttl SECONDS]`` prints a session token.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from agent.config import DEFAULT_CONFIG_PATH, ConfigError, env_name, load_config, options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agent",
        description="Real-time streaming voice agent server for banking.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="start the call server",
        description=(
            "Start the WebSocket call server (protocol v1, see protocol/README.md) with "
            "/healthz and /metrics on the same port. Options come from the config file, "
            "then AGENT_<SECTION>_<KEY> environment variables, then these flags."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    serve.add_argument(
        "--config",
        type=Path,
        default=None,
        help=f"TOML configuration file (env AGENT_CONFIG; default {DEFAULT_CONFIG_PATH})",
    )
    groups: dict[str, argparse._ArgumentGroup] = {}
    for section, key, kind, default, text in options():
        group = groups.setdefault(section, serve.add_argument_group(f"[{section}]"))
        group.add_argument(
            f"--{section}.{key}",
            dest=f"{section}.{key}",
            metavar=kind.__name__.upper(),
            default=argparse.SUPPRESS,
            help=f"{text} (env {env_name(section, key)}; default {default!r})",
        )
    token = commands.add_parser(
        "token",
        help="print a signed session token for a customer",
        description=(
            "Print a session token (HMAC-SHA256 with [auth] secret) for session.start. "
            "Reads the same configuration as serve."
        ),
    )
    token.add_argument("--customer", required=True, help="customer id, e.g. cust-001")
    token.add_argument("--ttl", type=float, default=None, help="lifetime in seconds")
    token.add_argument("--config", type=Path, default=None, help="TOML configuration file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = vars(_parser().parse_args(argv))
    command, config_path = args.pop("command"), args.pop("config")
    customer, ttl = args.pop("customer", None), args.pop("ttl", None)
    try:
        config = load_config(config_path, overrides=args)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    if command == "token":
        from agent.auth import mint

        print(mint(customer, config.auth.secret, ttl_s=ttl or config.auth.token_ttl_s))
        return 0
    if command == "serve":
        import uvloop

        from agent.log import configure_logging
        from agent.server import run

        configure_logging(config.log.level)
        uvloop.run(run(config))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
