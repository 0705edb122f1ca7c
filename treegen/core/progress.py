"""Progress bars on stderr (a thin wrapper around tqdm).

A bar is shown only when the stream (stderr by default) is a terminal and the user did not ask
for ``--quiet``; otherwise a disabled bar is returned, so callers never need to branch::

    with progress_bar(total=1000, desc="efti", quiet=args.quiet) as bar:
        bar.update(10)
"""

from __future__ import annotations

import sys
from typing import IO

from tqdm import tqdm


def enabled(quiet: bool = False, stream: IO | None = None) -> bool:
    """Whether a bar would be drawn: not quiet and the stream is an interactive terminal."""
    if quiet:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or non-standard stream
        return False


def progress_bar(total: int | None = None, desc: str = "", *, quiet: bool = False, unit: str = "it",
                 stream: IO | None = None, **kwargs) -> tqdm:
    """A tqdm bar on ``stream`` (stderr), disabled when :func:`enabled` is false.

    The bar is removed when closed (``leave=False``), so it never mixes with the results printed
    on stdout. Extra keyword arguments go to :class:`tqdm.tqdm`.
    """
    stream = sys.stderr if stream is None else stream
    kwargs.setdefault("leave", False)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=not enabled(quiet, stream), **kwargs)
