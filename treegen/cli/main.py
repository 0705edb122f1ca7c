"""Command-line interface: ``treegen fit | predict | eval | cv | show | compare | tune | import | export | targets | build | flash | hil | farm | plot | dataset``.

Results go to stdout, progress bars to stderr (only on a terminal, never with ``--quiet``).
Every user error prints one line ``treegen: error: ...`` on stderr and exits with status 2;
SIGINT (Ctrl-C), SIGTERM and SIGHUP stop the command, every child process (QEMU, the native
harness, PlatformIO) is stopped, and the exit status is 128 + the signal number (130, 143, 129).
Unexpected exceptions (bugs) keep their traceback.

``--json FILE`` writes a command's figures as JSON. One units rule: every accuracy-like figure in
JSON (accuracy, agreement, precision, recall, F1, ROC AUC, OOB score, their means and CIs) is a
fraction 0..1, as ``score()`` and the model metadata; percent appears only in human-readable text.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import warnings

from treegen.cli.commands import COMMANDS
from treegen.cli.common import CLIError, HilFailed
from treegen.core import interrupts
from treegen.core.interrupts import Interrupted
from treegen.core.errors import TreegenError
from treegen.core.version import __version__
from treegen.learn.cluster_signals import children_ignore_sigint

PROG = "treegen"


class _Parser(argparse.ArgumentParser):
    """argparse parser whose errors are one line ``treegen: error: ...`` (no usage block)."""

    def error(self, message: str):  # type: ignore[override]
        raise CLIError(f"{message} (see '{self.prog} --help')")



_ALL = object()


def build_parser(command: str | None = _ALL) -> argparse.ArgumentParser:  # type: ignore[assignment]
    """The command line's parser. By default every subcommand's options; with ``command``, only that
    command's (its ``treegen.cli`` module is the only one imported), the others listed by name and help
    line (:data:`treegen.cli.commands.COMMANDS`): ``None`` builds none, for ``treegen --help`` and
    ``--version``. Either way ``treegen --help`` is the same text."""
    parser = _Parser(prog=PROG, description="Decision trees for microcontrollers: induce, evaluate, inspect.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    registered = set()
    for name, (module, help_line) in COMMANDS.items():                  # the order of 'treegen --help'
        if command is _ALL or COMMANDS.get(command, ("",))[0] == module:
            if module not in registered:                               # a module registers all its commands
                registered.add(module)
                importlib.import_module(f"treegen.cli.{module}").register(sub)
        else:
            sub.add_parser(name, help=help_line, add_help=False)       # listed only; never parses
    return parser


def command_of(argv: list[str]) -> str | None:
    """The subcommand named on the command line ``argv``: its first argument that is not an option
    (the top-level options, ``--help`` and ``--version``, take no value); None if there is none."""
    return next((a for a in argv if not a.startswith("-")), None)


# ---------------------------------------------------------------------- entry point
def _error(message: str) -> None:
    one_line = " ".join(str(message).split())
    print(f"{PROG}: error: {one_line}", file=sys.stderr)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _on_stop_signal(signum, frame) -> None:
    # the first signal interrupts the command; the cleanup that follows is not interrupted again
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    interrupts.record(signum)
    raise Interrupted(signum)


def _on_sigint(signum, frame) -> None:
    interrupts.record(signum)       # raised again by interrupts.check() if Python drops the exception
    raise KeyboardInterrupt()


def _install_handlers() -> dict:
    """SIGTERM/SIGHUP -> :class:`Interrupted`, SIGINT -> KeyboardInterrupt (when Python's own handler is
    in place), both recorded (:mod:`treegen.core.interrupts`), in the main thread; returns the previous
    handlers."""
    previous = {}
    interrupts.delivered()
    try:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, _on_stop_signal)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:       # not the main thread (an embedding application): leave signals alone
        pass
    return previous


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 128 + n on signal n)."""
    previous = _install_handlers()
    try:
        return _main(argv)
    finally:
        from treegen.device import processes

        processes.stop_all()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main(argv: list[str] | None) -> int:
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            argv = sys.argv[1:] if argv is None else list(argv)
            parser = build_parser(command_of(argv))
            args = parser.parse_args(argv)
            if args.command is None:                 # bare 'treegen': the overview, not an error
                parser.print_help()
                return 0
            # no output may destroy an input ('-' = stdout); Python workers (Dask, joblib) ignore a terminal's
            # Ctrl-C, which treegen handles by stopping them
            from treegen.cli.paths import check_command    # after parsing: --help/--version need none of it

            with check_command(parser, args), children_ignore_sigint():
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
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except Exception as exc:
        # a library unwinding from Ctrl-C may fail on its own way out (joblib's process pool, interrupted
        # while it starts: "RuntimeError: cannot join thread before it is started"): still an interrupt
        interrupt = interrupt_behind(exc)
        if interrupt is None:
            raise
        return _interrupted(interrupt)


def interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (KeyboardInterrupt) or stop signal (:class:`Interrupted`) that ``exc`` was raised while
    handling, if any (its ``__context__`` chain)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__context__
    return None


def _interrupted(exc: KeyboardInterrupt) -> int:
    interrupts.delivered()
    signum = getattr(exc, "signum", signal.SIGINT)
    by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    print(f"{PROG}: interrupted{by}", file=sys.stderr)
    return 128 + int(signum)


if __name__ == "__main__":
    sys.exit(main())
