"""cli — the top of the house: argument parsing, human-readable output and exit codes.

:mod:`~treegen.cli.main` builds the parser and maps errors to exit statuses; one module per command
group registers and runs its commands: :mod:`~treegen.cli.models` (fit, predict, eval, cv, show),
:mod:`~treegen.cli.export` (export, targets), :mod:`~treegen.cli.firmware` (build, flash),
:mod:`~treegen.cli.hil` (hil). Only this package prints for humans; nothing outside it imports it.
"""

from treegen.cli.main import build_parser, main

__all__ = ["main", "build_parser"]
