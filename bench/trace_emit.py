"""Follow one model through ``treegen build`` and count how often control enters each emit module.

Usage::

    python bench/trace_emit.py [MODEL] [--target qemu-m4] [--sequence]

Runs ``treegen build MODEL --target T -o <temp dir>`` in this process under :func:`sys.setprofile`
(MODEL defaults to a small EFTI tree fitted on ``irs`` with a fixed seed). Only treegen's own
modules are places: frames of the standard library, numpy, Jinja or PlatformIO are transparent, so
a call from ``treegen.emit.export`` into ``numpy`` and back stays inside ``treegen.emit.export``.
Two counts per ``treegen.emit.*`` module:

``entries``  calls into the module from another treegen module (or from outside treegen): how many
             times the flow has to come *to* the module. A property or a dataclass ``__init__``
             counts for the module that defines it.
``stops``    how many times the module becomes the running treegen module, by a call into it or by a
             return into it from another module (every return from a ``treegen.core`` helper is one).

Module bodies run at import time are not counted (every treegen module is imported before tracing).
``--sequence`` prints the whole timeline of treegen modules. tests/emit/test_emit_passes.py keeps
the bound (each emit module entered at most twice).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import pkgutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import treegen  # noqa: E402

EMIT = "treegen.emit."


def import_all() -> None:
    """Import every treegen module (import-time module bodies are not part of the flow)."""
    for info in pkgutil.walk_packages(treegen.__path__, "treegen."):
        if not info.name.startswith("treegen.hil."):      # the pytest plugin's modules need pytest's context
            importlib.import_module(info.name)


def _module(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name == "treegen" or name.startswith("treegen.") else None


def _treegen_caller(frame) -> str | None:
    """The nearest treegen module below ``frame`` on the stack (None: called from outside treegen)."""
    f = frame.f_back
    while f is not None:
        mod = _module(f)
        if mod is not None:
            return mod
        f = f.f_back
    return None


class Tracer:
    """Records entries and the timeline of treegen modules while active (``with Tracer() as t:``)."""

    def __init__(self) -> None:
        self.entries: Counter = Counter()
        self.timeline: list[str] = []

    def _stop(self, mod: str) -> None:
        if not self.timeline or self.timeline[-1] != mod:
            self.timeline.append(mod)

    def __call__(self, frame, event, arg) -> None:
        if event not in ("call", "return"):
            return
        mod = _module(frame)
        if mod is None or frame.f_code.co_name == "<module>":
            return
        if event == "call":
            if mod.startswith(EMIT) and _treegen_caller(frame) != mod:
                self.entries[mod] += 1
            self._stop(mod)
        else:
            back = _treegen_caller(frame)
            if back is not None:
                self._stop(back)

    def __enter__(self) -> "Tracer":
        import_all()
        sys.setprofile(self)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)

    def stops(self) -> Counter:
        return Counter(m for m in self.timeline if m.startswith(EMIT))


def trace_build(model_path, target: str = "qemu-m4") -> Tracer:
    """Run ``treegen build`` on ``model_path`` under a :class:`Tracer` (its output is discarded)."""
    from treegen.cli import main

    with tempfile.TemporaryDirectory(prefix="treegen-trace-") as tmp, contextlib.redirect_stdout(io.StringIO()):
        with Tracer() as tracer:
            rc = main(["build", str(model_path), "--target", target, "-o", str(Path(tmp) / "fw")])
    if rc != 0:
        raise RuntimeError(f"treegen build exited with {rc}")
    return tracer


def small_model(path: Path) -> Path:
    """A small EFTI tree on irs (``treegen fit``, fixed seed), written to ``path``."""
    from treegen.cli import main

    data = ROOT.parent / "shared" / "datasets" / "irs.csv.gz"
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(["fit", str(data), "--algo", "efti", "--max-iter", "2000", "--seed", "1", "-o", str(path)])
    if rc != 0:
        raise RuntimeError(f"treegen fit exited with {rc}")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="model file (default: a small EFTI tree on irs)")
    ap.add_argument("--target", default="qemu-m4")
    ap.add_argument("--sequence", action="store_true", help="print the timeline of treegen modules")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="treegen-trace-model-") as tmp:
        tr = trace_build(a.model or small_model(Path(tmp) / "model.json"), a.target)
    print(f"# python bench/trace_emit.py{' ' + a.model if a.model else ''} --target {a.target}")
    stops = tr.stops()
    print(f"{'module':28s} {'entries':>7s} {'stops':>6s}")
    for m in sorted(set(tr.entries) | set(stops)):
        print(f"{m:28s} {tr.entries[m]:7d} {stops[m]:6d}")
    print(f"timeline: {len(tr.timeline)} stops over treegen modules")
    if a.sequence:
        print("\n".join("  " + m for m in tr.timeline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
