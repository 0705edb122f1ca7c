"""The ``device`` extra: the Python packages that building for, flashing and talking to a device need
beyond treegen's core (``pip install 'treegen[device]'``: pyserial, platformio, scons).

They are imported only where they are used, so that fit, cv, predict, eval, show and export work
without them; a command that needs a missing one fails with one line naming the extra.
"""

from __future__ import annotations

import importlib.util

from treegen.core.errors import TreegenError

INSTALL = "pip install 'treegen[device]'"


def missing(package: str, what: str) -> TreegenError:
    """The error for ``package`` missing when ``what`` needs it."""
    return TreegenError(f"{package} is not installed; {what} needs the device extra: {INSTALL}")


def require(module: str, package: str, what: str) -> None:
    """Raise :func:`missing` unless ``module`` (of the pip package ``package``) can be imported."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise missing(package, what)
