"""Command-line interface: ``treegen fit | predict | eval | cv | show | compare | export | targets | build | flash | hil``.

Results go to stdout, progress bars to stderr (only on a terminal, never with ``--quiet``).
Every user error prints one line ``treegen: error: ...`` on stderr and exits with status 2;
an interrupt exits with 130. Unexpected exceptions (bugs) keep their traceback.

``--json FILE`` writes the figures of ``fit``, ``eval`` and ``cv`` as JSON; accuracies there are
percentages (0..100), like on screen.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from treegen.cli import compare, export, firmware, hil, models, plot
from treegen.cli.common import CLIError, HilFailed
from treegen.core.errors import TreegenError
from treegen.core.version import __version__

PROG = "treegen"


class _Parser(argparse.ArgumentParser):
    """argparse parser whose errors are one line ``treegen: error: ...`` (no usage block)."""

    def error(self, message: str):  # type: ignore[override]
        raise CLIError(f"{message} (see '{self.prog} --help')")



def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Decision trees for microcontrollers: induce, evaluate, inspect.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in (models, compare, export, firmware, hil, plot):    # the order of 'treegen --help'
        group.register(sub)
    return parser


# ---------------------------------------------------------------------- entry point
def _error(message: str) -> None:
    one_line = " ".join(str(message).split())
    print(f"{PROG}: error: {one_line}", file=sys.stderr)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 130 interrupted)."""
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            parser = build_parser()
            args = parser.parse_args(argv)
            if args.command is None:                 # bare 'treegen': the overview, not an error
                parser.print_help()
                return 0
            return int(args.func(args) or 0)
    except TreegenError as exc:
        if isinstance(exc, HilFailed):
            print(f"{PROG}: hil failed: {' '.join(str(exc).split())}", file=sys.stderr)
            return 1
        _error(str(exc))
        return 2
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            # stdout closed early (e.g. piped into `head`): silence the flush at exit
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError, AttributeError):
                pass
            return 1
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        _error(f"{where}{exc.strerror or exc}")
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


if __name__ == "__main__":
    sys.exit(main())
