"""Names that reach generated text are escaped for their medium (issue 24): C strings and comments
(trigraphs, comment delimiters, backslashes, quotes, newlines, non-ASCII), compare's Markdown
(newlines, pipes), matplotlib text (no mathtext), and a binary target file is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # tests/export_models.py
from export_models import make_model, random_tree, require, run_cc  # noqa: E402

from conftest import assert_user_error  # noqa: E402
from treegen.core.codegen import c_string_body, comment_text  # noqa: E402

# one name per class of special character (the fuzz list): every trigraph, comment delimiters, a
# trailing backslash (line splice), quotes, white space of every kind, printf directives, non-ASCII
# (two- to four-byte UTF-8), control characters, Markdown and mathtext syntax
NAMES = ["tri??/", "??=", "??(", "??)", "??'", "??<", "??!", "??>", "??-", "???/", "a*/b", "/*c", "// d",
         "back\\", "\\n\\", 'quo"te', "it's", "new\nline", "tab\there", "cr\r", "%s%n%d", "café", "日本",
         "\U0001f333", "ctl\x01\x1f\x7f", "$x^2$", "$\\frac{$", "a|b", "# head", "`tick`", "<b>*i*</b>",
         "[link](x)", " lead", "?"]
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-Wtrigraphs", "-pedantic"]


def _model(n_classes: int = 8):
    """Every fuzz name as a feature name, eight of them as class labels, trees that use every feature."""
    rng = np.random.default_rng(3)
    n = len(NAMES)
    trees = [random_tree(rng, n, n_classes, 20, "axis"), random_tree(rng, n, n_classes, 9, "efti")]
    return make_model(trees, n, n_classes, classes=NAMES[:n_classes], names=list(NAMES))


def test_escapes_leave_no_trigraph_no_comment_end_no_splice():
    for name in NAMES:
        comment = comment_text(name)
        assert "??" not in comment and "*/" not in comment and "/*" not in comment
        assert "\n" not in comment and "\r" not in comment and not comment.endswith("\\")
        assert comment.isascii() and comment.isprintable()
        body = c_string_body(name)
        assert "??" not in body and body.isascii() and body.isprintable()
        # the string body decodes back to the name's bytes (C's escapes: octal and \\ \")
        assert body.encode().decode("unicode_escape").encode("latin-1") == name.encode()


@pytest.mark.parametrize("dtype, layout", [("q15", "table"), ("q15", "unrolled"), ("f32", "table")])
def test_fuzz_names_export_compiles_with_werror_and_prints_the_labels(tmp_path, dtype, layout):
    from treegen.emit.export import export_model

    gcc = require("gcc")
    model = _model()
    export_model(model, tmp_path, target="native", layout=layout, dtype=dtype, name="fuzz", measure=False,
                 example=True)
    exe = tmp_path / "fuzz"
    run_cc([gcc, *STRICT, "-O1", "-I", str(tmp_path), str(tmp_path / "fuzz.c"), str(tmp_path / "example" / "main.c"),
            "-o", str(exe)])
    proc = subprocess.run([str(exe)], capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert b"rows differ from the Python model" in out and b" 0 of " in b" " + out.splitlines()[-1], out
    printed = {line.split(b", expected ", 1)[1] for line in out.splitlines() if b", expected " in line}
    assert printed and printed <= {c.encode() for c in model.classes}, printed   # the labels' exact bytes
    for source in (tmp_path / "fuzz.h", tmp_path / "fuzz.c"):      # no name's character reaches the C raw
        assert {ch for ch in source.read_text(encoding="utf-8") if not ch.isascii()} <= {"\u2014"}  # banner dash


def test_fuzz_names_native_harness_builds(tmp_path):
    from treegen.device.firmware import build_native

    exe = build_native(_model(), tmp_path)
    assert exe.is_file()


# ---------------------------------------------------------------------- Markdown
def test_compare_markdown_keeps_names_in_their_cell():
    from treegen.cli.compare import render_markdown

    evil = "evil\n# injected heading | x"
    stat = {"mean": 0.5, "ci95": 0.1}
    cell = {"accuracy": stat, "leaves": stat, "flash_bytes": None, "train_seconds": stat}
    result = {
        "summary": {"methods": [evil, "ok"], "datasets": ["d|1\n## h"], "best": {"d|1\n## h": [evil]},
                    "cells": {"d|1\n## h": {evil: cell, "ok": cell}}, "average_ranks": None,
                    "friedman": None, "wilcoxon": None},
        "n_tasks_run": 1, "n_tasks": 1, "wall_seconds": 1.0, "cluster": "a local Dask cluster",
        "folds": 2, "repeats": 1, "seed": 0, "task_seconds": 1.0, "command": "treegen compare `x`\n# y",
        "methods": {evil: {"algorithm": "cart", "params": {"max_depth": "3\n# p|q"}},
                    "ok": {"algorithm": "cart", "params": {}}},
    }
    md = render_markdown(result)
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings == [line for line in headings if line.startswith(("# treegen compare", "## "))]
    assert not any("injected" in h or h.startswith("## h") or "# y" in h or "# p" in h for h in headings), headings
    for line in md.splitlines():
        if line.startswith("| d"):
            # one unescaped pipe per cell boundary: dataset + 2 methods -> 4 pipes
            assert line.replace("\\|", "").count("|") == 4, line


# ---------------------------------------------------------------------- plots
def test_plots_draw_mathtext_names_as_text(tmp_path):
    from treegen.emit.plot import plot_confusion, plot_partition, plot_tree

    rng = np.random.default_rng(0)
    X = rng.integers(0, 100, size=(60, 2)).astype(float)
    y = np.where(X[:, 0] > 50, "$\\frac{$", "$x^2$").astype(object)
    from treegen.learn.estimators import CARTClassifier

    model = CARTClassifier(max_depth=2).fit(X, y, feature_names=["$\\alpha_$", "a$b"]).model_
    for fn, args in ((plot_tree, (model, tmp_path / "t.svg")),
                     (plot_partition, (model, X, y, tmp_path / "p.svg")),
                     (plot_confusion, (model, X, y, tmp_path / "c.png"))):
        out = fn(*args)
        assert Path(out).stat().st_size > 0
    svg = (tmp_path / "t.svg").read_text()
    assert "$\\alpha_$" in svg or "$\\alpha_$".replace("\\", "&#92;") in svg or "\\alpha_" in svg


# ---------------------------------------------------------------------- target files
def test_binary_target_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "board.toml"
    bad.write_bytes(bytes(range(256)) * 4)
    assert_user_error(capsys, ["export", str(tmp_path / "m.json"), "--target", str(bad), "-o", str(tmp_path / "out")],
                      "board.toml")
    latin = tmp_path / "latin.toml"
    latin.write_bytes('name = "latin"\ncore = "caf\xe9"\n'.encode("latin-1"))
    from treegen.core import targets
    from treegen.core.errors import TreegenError

    with pytest.raises(TreegenError, match="latin.toml: not UTF-8 text"):
        targets.get(str(latin))
    with pytest.raises(TreegenError, match="target file board.toml is not a text file"):
        targets.get(str(bad))


def test_target_file_name_with_trigraphs_and_backslashes_compiles(tmp_path):
    """A user's target file named ``odd??\\`` (its name is its file stem) reaches the banner comment of
    every generated file: escaped by the c_comment filter, the export still builds with -Werror."""
    from treegen.emit.export import export_model

    gcc = require("gcc")
    native = (Path(__file__).resolve().parents[2] / "targets" / "native.toml").read_text()
    name = "odd??\\"
    target = tmp_path / f"{name}.toml"
    target.write_text(native.replace('name = "native"', f'name = "{name}"'.replace("\\", "\\\\")))
    out = tmp_path / "out"
    export_model(_model(), out, target=str(target), name="fuzz", measure=False, example=True)
    header = (out / "fuzz.h").read_text()
    assert "odd?\\?\\x5c" in header
    run_cc([gcc, *STRICT, "-I", str(out), str(out / "fuzz.c"), str(out / "example" / "main.c"), "-o", str(tmp_path / "x")])
