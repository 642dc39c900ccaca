"""The `shoal` command: one sub-command per module `shoal.cli.cmd_<name>`.

Each command module exposes `register(subparsers) -> None`, which adds its parser and sets
`func(args) -> int` as the parser default. A command module that fails to import (an optional
dependency missing) is reported when invoked, never silently dropped.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# Order = order in `shoal --help`.
COMMAND_MODULES = (
    "simulate",
    "cycle",
    "conformance",
    "fgd",
    "podgroup",
    "run",
    "queues",
    "pending",
    "explain",
    "snapshot",
    "install_crds",
    "gpu_reservation_agent",
    "webhook",
)


class _VersionAction(argparse.Action):
    """`--version`: computed only when asked (it may run git), printed on stdout."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from shoal.cli.version import version_text

        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shoal",
        description="shoal: a Kubernetes-native batch scheduler for GPU and AI workloads (KAI-compatible).",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version and the git commit it was built from, then exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"shoal.cli.cmd_{name}")
        except ModuleNotFoundError as err:
            if err.name == f"shoal.cli.cmd_{name}":
                continue  # command not built yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
