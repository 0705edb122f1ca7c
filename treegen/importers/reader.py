"""Reading a foreign model file once, bounded: the bytes, then a JSON or UBJSON document of bounded size
and depth.

* :func:`read_source` reads a path (a regular file, a pipe such as ``/dev/stdin``, a FIFO) once, in
  chunks, and stops with one line at :data:`MAX_IMPORT_BYTES` whatever the file claims its size is (a
  pipe reports 0, ``/dev/zero`` never ends). The format is then detected on these bytes and the same
  bytes are parsed: a stream is never read twice.
* :func:`loads_json` refuses a document nested deeper than :data:`MAX_IMPORT_DEPTH` (found by a
  linear pre-scan, before the recursive parser runs), an integer of more than 20 digits, ``NaN`` /
  ``Infinity`` literals, a key twice in one object and text that is not UTF-8.
* :func:`loads_ubjson` decodes the UBJSON subset XGBoost writes (objects, arrays, strongly typed arrays,
  every number marker), iteratively with the same depth bound and every length checked against the bytes
  left.

Every problem is a :class:`~treegen.core.errors.TreegenError` line starting with the file name.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.limits import MAX_MODEL_BYTES, bytes_text

__all__ = ["MAX_IMPORT_BYTES", "MAX_IMPORT_DEPTH", "NamedBytes", "read_source", "loads_json", "loads_ubjson"]

MAX_IMPORT_BYTES = max(MAX_MODEL_BYTES, 256 << 20)
MAX_IMPORT_DEPTH = 64        # XGBoost's documents nest 7 levels; a model needs no more than a few
MAX_INT_DIGITS = 20
CHUNK = 1 << 20


class NamedBytes(bytes):
    """The bytes of a model file read by :func:`read_source`, with the ``name`` the messages give it
    (the file's name; by default the format's, the class attribute). One subclass per format, so an
    importer knows the bytes it is given are its own format's."""

    name = "model"

    def __new__(cls, raw: bytes, name: str | None = None):
        obj = super().__new__(cls, raw)
        obj.name = str(cls.name if name is None else name)
        return obj


def read_source(path, limit: int | None = None) -> bytes:
    """Every byte of the file at ``path``, read once with a cap of ``limit`` (default
    :data:`MAX_IMPORT_BYTES`, looked up at call time) bytes; never trusts ``st_size``."""
    limit = MAX_IMPORT_BYTES if limit is None else limit
    path = Path(path)
    if path.is_dir():
        raise TreegenError(f"{path} is a folder, not a model file")
    parts, total = [], 0
    try:
        with open(path, "rb") as fh:
            while True:
                chunk = fh.read(min(CHUNK, limit + 1 - total))
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise TreegenError(f"{path}: more than {bytes_text(limit)}, the most treegen reads from a "
                                       "model file")
                parts.append(chunk)
    except FileNotFoundError:
        raise TreegenError(f"{path}: model file not found") from None
    except OSError as exc:
        raise TreegenError(f"cannot read {path}: {exc.strerror or exc}") from None
    return b"".join(parts)


# ------------------------------------------------------------------------------------------------ JSON
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def json_depth(raw: bytes) -> int:
    """The deepest nesting of ``[`` / ``{`` in the JSON text ``raw`` (strings skipped), in linear time."""
    text = _STRING.sub(b'""', raw)
    b = np.frombuffer(text, dtype=np.uint8)
    step = (np.isin(b, (ord("["), ord("{"))).astype(np.int32) - np.isin(b, (ord("]"), ord("}"))).astype(np.int32))
    return int(np.cumsum(step).max()) if step.size else 0


def _refuse_constant(name: str, source: str):
    raise TreegenError(f"{source}: {name} is not a JSON number (NaN / Infinity are not standard JSON)")


def loads_json(raw: bytes, source: str):
    """The JSON document of ``raw`` (see the module documentation)."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TreegenError(f"{source}: not UTF-8 JSON text (byte {exc.start})") from None
    depth = json_depth(text.encode("utf-8"))
    if depth > MAX_IMPORT_DEPTH:
        raise TreegenError(f"{source}: JSON nested {depth} levels deep, more than {MAX_IMPORT_DEPTH}")

    def parse_int(s: str) -> int:
        if len(s.lstrip("-")) > MAX_INT_DIGITS:
            raise TreegenError(f"{source}: an integer of {len(s.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
        return int(s)

    def parse_float(s: str) -> float:
        if len(s) > 64:
            raise TreegenError(f"{source}: a number of {len(s)} characters (at most 64)")
        return float(s)

    def pairs(items):
        d = dict(items)
        if len(d) != len(items):
            seen = set()
            key = next(k for k, _ in items if k in seen or seen.add(k))
            raise TreegenError(f"{source}: the key {key!r} appears twice in one object (libraries keep "
                               "different ones)")
        return d

    try:
        return json.loads(text, parse_int=parse_int, parse_float=parse_float, object_pairs_hook=pairs,
                          parse_constant=lambda name: _refuse_constant(name, source))
    except json.JSONDecodeError as exc:
        raise TreegenError(f"{source}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except RecursionError:      # the pre-scan bounds the depth; kept for a parser that recurses more
        raise TreegenError(f"{source}: JSON nested too deeply") from None


# ---------------------------------------------------------------------------------------------- UBJSON
_NUM = {b"i": (">b", 1), b"U": (">B", 1), b"I": (">h", 2), b"l": (">i", 4), b"L": (">q", 8),
        b"d": (">f", 4), b"D": (">d", 8)}
_NP = {b"i": ">i1", b"U": ">u1", b"I": ">i2", b"l": ">i4", b"L": ">i8", b"d": ">f4", b"D": ">f8"}
_INT_MARKERS = b"iUIlL"


class _Ubj:
    def __init__(self, raw: bytes, source: str):
        self.raw, self.pos, self.source = raw, 0, source

    def fail(self, problem: str):
        raise TreegenError(f"{self.source}: not a valid UBJSON model ({problem} at byte {self.pos})")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.raw):
            self.fail(f"{n} bytes wanted, {len(self.raw) - self.pos} left")
        out = self.raw[self.pos:self.pos + n]
        self.pos += n
        return out

    def marker(self) -> bytes:
        m = self.take(1)
        while m == b"N":        # no-op
            m = self.take(1)
        return m

    def number(self, m: bytes):
        fmt, n = _NUM[m]
        v = struct.unpack(fmt, self.take(n))[0]
        return float(v) if m in b"dD" else int(v)

    def length(self) -> int:
        m = self.marker()
        if m not in _INT_MARKERS or len(m) != 1:
            self.fail(f"a length with marker {m!r}")
        n = self.number(m)
        if n < 0 or n > len(self.raw) - self.pos:
            self.fail(f"a length of {n}")
        return n

    def string(self) -> str:
        data = self.take(self.length())
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            self.fail("a string that is not UTF-8")

    def scalar(self, m: bytes):
        if m in _NUM and len(m) == 1:
            return self.number(m)
        if m == b"S":
            return self.string()
        if m == b"C":
            return self.take(1).decode("latin-1")
        if m == b"H":
            text = self.string()
            if len(text) > 64:
                self.fail("a high-precision number of more than 64 characters")
            try:
                return float(text)
            except ValueError:
                self.fail("a bad high-precision number")
        if m == b"T":
            return True
        if m == b"F":
            return False
        if m == b"Z":
            return None
        self.fail(f"unknown marker {m!r}")

    def container_header(self):
        """(type marker or None, count or None) after '[' or '{'."""
        typ = count = None
        if self.raw[self.pos:self.pos + 1] == b"$":
            self.pos += 1
            typ = self.take(1)
            if self.raw[self.pos:self.pos + 1] != b"#":
                self.fail("a typed container without a count")
        if self.raw[self.pos:self.pos + 1] == b"#":
            self.pos += 1
            count = self.length() if typ is None or typ not in _NP else self._count_typed(typ)
        return typ, count

    def _count_typed(self, typ: bytes) -> int:
        m = self.marker()
        if m not in _INT_MARKERS or len(m) != 1:
            self.fail(f"a length with marker {m!r}")
        n = self.number(m)
        if n < 0 or n * _NUM[typ][1] > len(self.raw) - self.pos:
            self.fail(f"a typed array of {n} values")
        return n

    def decode(self):
        """Iterative: a stack of open containers, each [container, type, remaining count, pending key]."""
        root = []
        stack = [[root, None, 1, None]]
        while True:
            top = stack[-1]
            cont, typ, left, key = top
            if left == 0:
                stack.pop()
                if not stack:
                    break
                continue
            if isinstance(cont, dict) and key is None:      # next key (or the end)
                if left is None and self.raw[self.pos:self.pos + 1] == b"}":
                    self.pos += 1
                    top[2] = 0
                    continue
                top[3] = self.string()
                continue
            if typ is not None:
                m = typ
            else:
                m = self.marker()
                if m == b"]" and isinstance(cont, list) and left is None:
                    top[2] = 0
                    continue
            if m in (b"[", b"{"):
                if len(stack) > MAX_IMPORT_DEPTH:
                    self.fail(f"nested more than {MAX_IMPORT_DEPTH} levels")
                ctyp, count = self.container_header()
                if m == b"[" and ctyp in _NP:
                    value = np.frombuffer(self.take(count * _NUM[ctyp][1]), dtype=_NP[ctyp])
                    value = value.astype(np.float64 if ctyp in b"dD" else np.int64).tolist()
                    self._store(top, value)
                    continue
                value = [] if m == b"[" else {}
                self._store(top, value)
                stack.append([value, ctyp, count, None])
                continue
            self._store(top, self.scalar(m))
        if self.pos != len(self.raw):
            self.fail("bytes after the document")
        return root[0]

    def _store(self, top, value):
        cont, _typ, left, key = top
        if isinstance(cont, dict):
            if key in cont:
                self.fail(f"the key {key[:40]!r} twice in one object (libraries keep different ones)")
            cont[key] = value
            top[3] = None
        else:
            cont.append(value)
        if left is not None:
            top[2] = left - 1


def loads_ubjson(raw: bytes, source: str):
    """The UBJSON document of ``raw`` (the subset XGBoost writes; see the module documentation)."""
    return _Ubj(raw, source).decode()
