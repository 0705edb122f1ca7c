"""Interrupts Python swallowed: a signal handler's exception raised inside a finalizer or a weakref
callback (garbage collection, Dask futures being released) is printed as "Exception ignored" and
dropped, and the run goes on as if Ctrl-C had not been pressed.

The command line's handlers (:mod:`treegen.cli.main`) :func:`record` every SIGINT/SIGTERM/SIGHUP before
raising; :func:`delivered` forgets it once treegen has handled the interrupt; long loops call
:func:`check` between their steps, which raises the interrupt again if it was recorded and never
handled. Outside the command line nothing is recorded and :func:`check` does nothing.
"""

from __future__ import annotations

_pending: list[int] = []


class Interrupted(KeyboardInterrupt):
    """Signal ``signum`` received, raised in the main thread like Ctrl-C's KeyboardInterrupt so that the
    same cleanup runs: SIGTERM or SIGHUP (the command line's handler), or any interrupt :func:`check`
    raises again; the exit status is 128 + ``signum``."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def record(signum: int) -> None:
    """A signal handler is about to raise for ``signum``."""
    _pending.append(int(signum))


def delivered() -> None:
    """The interrupts recorded so far have reached treegen's handler (or a command starts afresh)."""
    _pending.clear()


def check() -> None:
    """Raise the first recorded interrupt that was never handled (:class:`Interrupted`)."""
    if _pending:
        signum = _pending[0]
        _pending.clear()
        raise Interrupted(signum)
