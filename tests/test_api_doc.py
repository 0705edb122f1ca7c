"""docs/api.md: every CLI command has a documented Python counterpart, and the document's examples run."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _subcommands() -> set[str]:
    from treegen.cli.main import build_parser

    parser = build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(subs) == 1
    return set(subs[0].choices)


def _table() -> dict[str, str]:
    rows = re.findall(r"^\| `([a-z-]+)` \| `([\w.]+)` \|", DOC.read_text(encoding="utf-8"), re.M)
    return dict(rows)


def _resolve(dotted: str):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def _examples() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)


def test_every_cli_command_has_a_documented_python_counterpart():
    table = _table()
    commands = _subcommands()
    assert commands == set(table), (sorted(commands - set(table)), sorted(set(table) - commands))
    code = "\n".join(_examples())
    for command, dotted in table.items():
        assert callable(_resolve(dotted)), dotted
        assert dotted.rsplit(".", 1)[-1] in code, f"{command}: {dotted} has no example in docs/api.md"
        assert re.search(rf"^## {re.escape(command)}$", DOC.read_text(encoding="utf-8"), re.M), command


def test_the_documented_examples_run(tmp_path, monkeypatch):
    """Run every example of docs/api.md in order, in one namespace, in a temporary folder, and check
    what they produce (the build/flash/hil examples use the real toolchain: PlatformIO, QEMU, gcc)."""
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in _examples():
            exec(compile(block, str(DOC), "exec"), ns)        # noqa: S102 - the project's own document
    text = out.getvalue()
    assert (tmp_path / "model.json").is_file() and (tmp_path / "tree.svg").stat().st_size > 0
    assert (tmp_path / "confusion.png").stat().st_size > 0 and (tmp_path / "cv.png").stat().st_size > 0
    assert (tmp_path / "model_c" / "model_c.h").is_file() or any((tmp_path / "model_c").glob("*.h"))
    assert ns["clf"].seed_ == 1 and abs(sum(ns["clf"].feature_importances_) - 1) < 1e-9
    assert 0.8 <= ns["report"]["accuracy"] <= 1 and 0.5 <= ns["cv"]["accuracy"]["mean"] <= 1
    assert ns["on_board"]["ok"] and ns["on_board"]["mismatches"] == 0 and 0 <= ns["on_board"]["float_agreement"] <= 1
    assert ns["hil"]["ok"] and ns["hil"]["accuracy"] == ns["report"]["accuracy"]
    cell = ns["farm"]["cells"][0]
    assert ns["farm"]["ok"] and (cell["place"], cell["result"], cell["accuracy"]) == ("native-1", "PASS",
                                                                                       ns["hil"]["accuracy"])
    assert ns["firmware"].elf.is_file() and ns["firmware"].flash_bytes > 0
    assert "qemu-m4 emulated" in text and "speed" in text
    assert ns["best"]["flash_bytes"] <= 2048 and ns["tuned"]["confirmation"]["ok"] and ns["tuned"]["front"]
