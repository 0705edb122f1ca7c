"""treegen.core.output.check_paths: the one output rule every command is checked by (issue 24)."""

from __future__ import annotations

import os

import pytest

from treegen.core.errors import TreegenError
from treegen.core.output import Output, check_paths, stdout_for_data, write_text


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "in").mkdir()
    data = tmp_path / "in" / "d.csv"
    data.write_text("a,y\n1,0\n")
    return tmp_path, data


def _refused(outputs, inputs, says):
    with pytest.raises(TreegenError, match=says):
        check_paths(outputs, inputs)


def test_an_output_that_is_an_input(tree, monkeypatch):
    t, data = tree
    os.link(data, t / "hard.csv")
    os.symlink(data, t / "sym.csv")
    os.symlink(t / "in", t / "dir")
    for path in (data, f"{t}/in/../in/d.csv", t / "hard.csv", t / "sym.csv", t / "dir" / "d.csv"):
        _refused([Output(str(path), "JSON file")], [data], "is also an input of this command")
    monkeypatch.chdir(t)
    _refused([Output("in/d.csv", "JSON file")], [data], "is also an input")          # relative vs absolute


def test_a_folder_that_holds_an_input(tree):
    t, data = tree
    for folder in (t / "in", t, t / "in" / "."):
        _refused([Output(str(folder), "output directory", "folder")], [data], "holds .*an input of this command")
    check_paths([Output(str(t / "out"), "output directory", "folder")], [data])     # beside it: fine
    (t / "file").write_text("x")
    _refused([Output(str(t / "file"), "output directory", "folder")], [], "is a file, not a directory")


def test_outputs_against_each_other_and_stdout(tree):
    t, data = tree
    _refused([Output(str(t / "a.json"), "JSON file"), Output(str(t / "a.json"), "Markdown file")], [],
             "JSON file and Markdown file are the same file")
    _refused([Output("-", "JSON file"), Output("-", "model file")], [], "only one output can go to standard output")
    _refused([Output("-", "picture", "binary")], [], "picture cannot be standard output")
    _refused([Output("-", "output directory", "folder")], [], "give a directory")
    check_paths([Output("-", "JSON file"), Output(os.devnull, "model file"), Output(os.devnull, "JUnit file")],
                ["-", "/dev/stdin", t / "missing.csv", data])   # streams and missing inputs cannot be replaced


def test_dash_writes_to_the_kept_stdout(capsys):
    with stdout_for_data():
        print("report")                        # the command's report: to stderr while stdout carries data
        write_text("-", "data\n", "JSON file")
    out, err = capsys.readouterr()
    assert out == "data\n" and err == "report\n"
