"""The Jinja environment for generated C, and the few value helpers the templates need.

All C text comes from the templates in ``templates/c/`` (``StrictUndefined``: a missing value is an
error, never an empty string). Python only prepares plain data — ints, strings, lists and dicts —
with the helpers below: C identifiers, integer field types chosen from value ranges (with an
explicit check, never a silent cap), escaped string-literal *contents* and comment-safe text.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from treegen.core.errors import TreegenError
from treegen.core.resources import templates_dir

# signed C integer types, smallest first: (name, bits, min, max)
INT_TYPES = (
    ("int8_t", 8, -(1 << 7), (1 << 7) - 1),
    ("int16_t", 16, -(1 << 15), (1 << 15) - 1),
    ("int32_t", 32, -(1 << 31), (1 << 31) - 1),
)


@lru_cache(maxsize=1)
def environment():
    """The Jinja2 environment of the C templates (cached)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    return env


def render(template: str, context: dict) -> str:
    """Render ``templates/<template>`` with ``context`` (plus ``template_name``)."""
    import jinja2

    try:
        return environment().get_template(template).render(template_name=template, ctx=context, **context)
    except jinja2.TemplateNotFound as exc:
        raise FileNotFoundError(f"treegen template {exc.name!r} not found (broken installation?)") from None


def prepare_out_dir(out_dir) -> Path:
    """Create the output directory of generated files; one-line error if it is a file or not creatable."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise TreegenError(f"output path {out} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TreegenError(f"cannot create output directory {out}: {exc.strerror or exc}") from None
    return out


def write_generated(path: Path, text: str) -> Path:
    """Write one generated file (UTF-8, LF line ends); one-line error if it cannot be written."""
    try:
        path.write_text(text, encoding="utf-8", newline="\n")
    except OSError as exc:
        raise TreegenError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def int_type(lo: int, hi: int, what: str) -> dict:
    """Smallest signed C type holding every value in ``lo..hi``: ``{"c": "int8_t", "bits": 8}``.

    Raises :class:`TreegenError` when not even ``int32_t`` can hold the range (``what`` names it).
    """
    for name, bits, tmin, tmax in INT_TYPES:
        if tmin <= lo and hi <= tmax:
            return {"c": name, "bits": bits}
    raise TreegenError(f"{what} needs values {lo}..{hi}, more than the widest field type (int32_t) holds")


def c_identifier(text: str, fallback: str = "model") -> str:
    """A lower-case C identifier part from a file or model name (``veh.json`` -> ``veh``)."""
    ident = re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()
    if not ident:
        ident = fallback
    if ident[0].isdigit():
        ident = f"m{ident}"
    return ident


def c_string_body(text: str) -> str:
    """``text`` escaped for use between double quotes in C (ASCII only; other bytes as octal)."""
    out = []
    for byte in str(text).encode("utf-8"):
        ch = chr(byte)
        if ch in "\\\"":
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F and ch != "?":  # '?' escaped: no trigraphs in C99
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def comment_text(text: str) -> str:
    """``text`` safe inside a ``/* ... */`` comment: one line, no comment terminator, ASCII."""
    flat = " ".join(str(text).split())
    flat = flat.replace("*/", "* /").replace("/*", "/ *")
    return flat.encode("ascii", "backslashreplace").decode("ascii")


def f32_literal(value: float) -> str:
    """Shortest decimal that rounds to the same float32 as ``value``, as a C ``float`` literal body.

    Values beyond the float32 range saturate to +-FLT_MAX (never ``inf``). The caller's template
    appends the ``f`` suffix.
    """
    v = float(value)
    big = float(np.finfo(np.float32).max)
    v = min(max(v, -big), big)
    text = str(np.float32(v))  # numpy prints the shortest round-trip decimal of the float32
    if "e" not in text and "." not in text:
        text += ".0"
    if text.startswith("-0.0") and float(text) == 0.0:
        text = "0.0"
    return text
