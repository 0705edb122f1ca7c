"""Host-compiled C kernels: render from the templates, compile with the strict flags, cache by source
hash, load through ctypes — one loader for every native engine.

A kernel is described once, as data::

    EFTI = NativeKernel("EFTI engine", ("efti/tg_efti.h.j2", "efti/tg_efti.c.j2"), "libtg_efti.so",
                        cache_name="engine")
    lib = EFTI.load(EFTI.render(ctx, note="Sizes: ..."))      # a ctypes.CDLL

:meth:`NativeKernel.render` renders each template (``templates/<folder>/<name>.j2`` -> ``<name>``) with
the banner every generated file carries; :meth:`NativeKernel.build` compiles every rendered ``.c``
file into a shared library with :data:`STRICT_CFLAGS` (the flags all of treegen's C meets) and the
kernel's optimisation flags. Libraries are cached under ``$TREEGEN_CACHE`` (default
``~/.cache/treegen``) in ``<cache_name>/<hash of sources and flags>/``, with their sources beside them;
a build compiles in a private temporary folder and renames the results into place, so concurrent
builders (parallel tests, joblib workers) never see half a library. Integer-only kernels without
undefined behaviour give the same results whatever the optimisation flags.

:meth:`NativeKernel.load_for` is ``load(render(ctx, note))`` that skips the rendering (Jinja: about
0.1 s of a command's start-up) when the same inputs were built before: ``<cache_name>/inputs/<key>``
names the library folder, the key hashing the generator version, the kernel, its flags, the context,
the note and every template file (so an edited template or include is a miss, rendered and built anew).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from treegen.core.codegen import render
from treegen.core.errors import TreegenError
from treegen.core.resources import templates_dir
from treegen.core.version import __version__

#: every C file treegen generates compiles cleanly with these
STRICT_CFLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-pedantic")
#: a shared library for ctypes
SHARED_CFLAGS = ("-fPIC", "-shared")


def compiler(cc: str | None = None) -> str:
    """The host C compiler: ``cc``, else ``$CC``, else ``cc``."""
    return cc or os.environ.get("CC", "cc")


def have_compiler(cc: str | None = None) -> bool:
    """A host C compiler is on the PATH (what the engines' ``auto`` choice asks)."""
    return shutil.which(compiler(cc)) is not None


def cache_dir() -> Path:
    """Where compiled kernels are kept: ``$TREEGEN_CACHE``, default ``~/.cache/treegen``."""
    return Path(os.environ.get("TREEGEN_CACHE", Path.home() / ".cache" / "treegen"))


def compile_cached(folder: str, sources: dict[str, str], flags: list[str], output: str, *, needs: str, label: str,
                   libs: tuple[str, ...] = (), cc: str | None = None, on_failure=None) -> Path:
    """``output`` compiled by the host C compiler from ``sources`` (``{file name: text}``; the ``.c``
    files are the units, the others sit beside them) with ``flags``, linked with ``libs``; cached in
    ``cache_dir()/folder/<hash of the names, texts, flags and libs>`` (kept: the sources, then the
    output, whose presence means complete). ``needs`` is what a missing compiler's message says ("the
    native EFTI engine needs a C compiler"), ``label`` names it when compiling fails ("compiling the EFTI engine
    failed: ..."); ``on_failure(stderr)`` may return a more specific :class:`TreegenError`."""
    digest = hashlib.sha256("\0".join([*sources, *sources.values(), *flags, *libs]).encode()).hexdigest()[:16]
    out_dir = cache_dir() / folder / digest
    target = out_dir / output
    if target.is_file():
        return target
    cc = compiler(cc)
    if shutil.which(cc) is None:
        raise TreegenError(f"{needs} ({cc!r} not found)")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        for name, text in sources.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        units = [str(Path(tmp) / name) for name in sources if name.endswith(".c")]
        res = subprocess.run([cc, *flags, "-o", str(Path(tmp) / output), *units, *libs], capture_output=True,
                             text=True)
        if res.returncode != 0:
            specific = on_failure(res.stderr) if on_failure is not None else None
            raise specific or TreegenError(f"compiling the {label} failed: {first_error(res.stderr)}")
        for name in [*sources, output]:          # the output last: its presence means complete
            os.replace(Path(tmp) / name, out_dir / name)
    return target


_LOADED: dict[Path, ctypes.CDLL] = {}


@dataclass(frozen=True)
class NativeKernel:
    """A C kernel compiled for the host and called through ctypes.

    ``label`` names it in messages ("the native EFTI engine needs a C compiler"); ``templates`` are
    its template paths under ``templates/`` (one folder); ``library`` the shared library's file name;
    ``cache_name`` its folder in the cache (default: the templates' folder); ``opt_flags`` the
    optimisation flags after :data:`STRICT_CFLAGS`.
    """

    label: str
    templates: tuple[str, ...]
    library: str
    cache_name: str = ""
    opt_flags: tuple[str, ...] = ("-O3",)

    @property
    def folder(self) -> str:
        return str(PurePosixPath(self.templates[0]).parent)

    @property
    def flags(self) -> list[str]:
        return [*STRICT_CFLAGS, *self.opt_flags, *SHARED_CFLAGS]

    def render(self, context: dict, note: str = "") -> dict[str, str]:
        """The kernel's sources, ``{file name: text}``: every template rendered with ``context`` plus
        ``banner`` (generator version, template folder, "do not edit", then ``note``)."""
        banner = f"Generated by treegen {__version__} from templates/{self.folder} — generated, do not edit."
        ctx = dict(context, banner=f"{banner} {note}" if note else banner)
        return {PurePosixPath(t).name.removesuffix(".j2"): render(t, ctx) for t in self.templates}

    def build(self, sources: dict[str, str], cc: str | None = None) -> Path:
        """The shared library compiled from ``sources`` (cached by the hash of sources and flags)."""
        return compile_cached(self.cache_name or self.folder, sources, self.flags, self.library,
                              needs=f"the native {self.label} needs a C compiler", label=self.label, cc=cc)

    def load(self, sources: dict[str, str], cc: str | None = None) -> ctypes.CDLL:
        """The compiled kernel loaded through ctypes (built if needed; loaded once per process)."""
        return _cdll(self.build(sources, cc))

    def inputs_key(self, context: dict, note: str = "") -> str:
        """The hash of everything :meth:`render` and :meth:`build` depend on but the compiler."""
        text = json.dumps([__version__, self.label, self.templates, self.library, self.flags, note, context,
                           templates_digest()], sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def load_for(self, context: dict, note: str = "", cc: str | None = None) -> ctypes.CDLL:
        """``load(render(context, note), cc)``, without rendering when these inputs were built before
        (the cache's ``inputs/<key>`` file names the library's folder)."""
        base = cache_dir() / (self.cache_name or self.folder)
        index = base / "inputs" / self.inputs_key(context, note)
        try:
            digest = index.read_text().strip()
        except OSError:
            digest = ""
        lib = base / digest / self.library if re.fullmatch(r"[0-9a-f]{16}", digest) else None
        if lib is None or not lib.is_file():
            lib = self.build(self.render(context, note), cc)
            _write_atomic(index, lib.parent.name)
        return _cdll(lib)


def _cdll(lib: Path) -> ctypes.CDLL:
    if lib not in _LOADED:
        _LOADED[lib] = ctypes.CDLL(str(lib))
    return _LOADED[lib]


def templates_digest() -> str:
    """The hash of every template file (names and contents): any edit changes it."""
    h = hashlib.sha256()
    root = templates_dir()
    for path in sorted(root.rglob("*.j2")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    """Write a small cache file through a temporary file and a rename (parallel writers: one wins)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        pass                     # an index that cannot be written only costs a rendering next time


def first_error(stderr: str) -> str:
    """The compiler's first error line (else its first line), for a one-line message."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()] or ["(no compiler output)"]
    return next((line for line in lines if "error" in line), lines[0])
