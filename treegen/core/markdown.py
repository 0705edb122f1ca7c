"""Names in Markdown text: a method, dataset or setting name (any text a user typed) stays inside
its table cell or list item and cannot start a heading, close a table cell or format the text."""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_\[\]<>|#!~])")


def md_text(text) -> str:
    """``text`` as inline Markdown that shows as typed: one line (white space runs, newlines included,
    become one space) and every character Markdown could act on backslash-escaped (``|`` cannot
    end a table cell, ``#`` cannot start a heading, ``*``/`` ` `` cannot format)."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def md_code(text) -> str:
    """``text`` as one inline code span: one line, fenced with more backticks than it holds."""
    flat = " ".join(str(text).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
