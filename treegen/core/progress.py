"""Progress bars on stderr (a thin wrapper around tqdm).

A bar is shown only when the stream (stderr by default) is a terminal and the user did not ask
for ``--quiet``; otherwise a bar that draws nothing is returned (:class:`NoBar`, tqdm not even
imported), so callers never need to branch::

    with progress_bar(total=1000, desc="efti", quiet=args.quiet) as bar:
        bar.update(10)
"""

from __future__ import annotations

import sys
from typing import IO


def enabled(quiet: bool = False, stream: IO | None = None) -> bool:
    """Whether a bar would be drawn: not quiet and the stream is an interactive terminal."""
    if quiet:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or non-standard stream
        return False


class NoBar:
    """What :func:`progress_bar` returns when no bar is drawn: the part of a disabled tqdm bar treegen
    uses (``update``, ``close``, ``refresh``, ``set_postfix``, ``set_description``, ``n``, ``total``, a
    context manager), without importing tqdm (about 35 ms of CPU at start-up)."""

    disable = True

    def __init__(self, total: int | None = None) -> None:
        self.total = total
        self.n = 0                      # as tqdm's when disabled: update() counts nothing

    def update(self, n: int = 1) -> None:
        pass

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass

    def set_postfix(self, *args, **kwargs) -> None:
        pass

    def set_description(self, *args, **kwargs) -> None:
        pass

    def __enter__(self) -> "NoBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress_bar(total: int | None = None, desc: str = "", *, quiet: bool = False, unit: str = "it",
                 stream: IO | None = None, **kwargs):
    """A tqdm bar on ``stream`` (stderr); a :class:`NoBar` when :func:`enabled` is false.

    The bar is removed when closed (``leave=False``), so it never mixes with the results printed
    on stdout. Extra keyword arguments go to :class:`tqdm.tqdm`.
    """
    stream = sys.stderr if stream is None else stream
    if not enabled(quiet, stream):
        return NoBar(total)
    from tqdm import tqdm            # here, not at import: only a drawn bar needs it

    kwargs.setdefault("leave", False)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(total=total, desc=desc, unit=unit, file=stream, **kwargs)
