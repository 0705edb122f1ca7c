"""One output rule for every command, tested from the argparse definitions (issue 24, part A):
an output that is an input (same path, hard link, symbolic link) or an output folder that holds an
input is refused with one line, exit 2, before any work and with nothing written; ``-`` is standard
output for every text output and refused with one line for the others.

The cases are generated from ``treegen.cli.main.build_parser()``: every subcommand, every argument
declared as an output (``treegen.cli.paths.output``) against every argument declared as an input
(``treegen.cli.paths.input_``). A new subcommand, or a new free-text option that is neither declared
nor listed in NOT_PATHS, fails :func:`test_every_path_argument_is_declared`."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import shutil

import pytest

from conftest import run_cli
from rel_util import DATASETS, ROOT
from treegen.cli.main import build_parser
from treegen.cli.paths import subparser

PARSER = build_parser()
COMMANDS = next(a for a in PARSER._actions if isinstance(a, argparse._SubParsersAction)).choices

#: a valid command line of each subcommand, as dest -> value; "in:KIND" is an input file of that kind,
#: "out:NAME" a fresh path in the test's folder
BASE = {
    "fit": {"data": "in:data", "algo": "cart", "output": "out:m.json"},
    "predict": {"model": "in:model", "data": "in:data"},
    "eval": {"model": "in:model", "data": "in:data"},
    "cv": {"data": "in:data", "algo": "cart", "folds": "2"},
    "show": {"model": "in:model"},
    "compare": {"datasets": ["in:dataset"], "algos": "cart", "folds": "2", "json": "out:c.json", "quiet": True},
    "export": {"model": "in:model", "target": "native", "output": "out:ex"},
    "targets": {},
    "build": {"model": "in:model", "target": "qemu-m4", "output": "out:fw"},
    "flash": {"model": "in:model", "target": "qemu-m4", "output": "out:fw"},
    "hil": {"model": "in:model", "target": "native", "data": "in:data", "output": "out:hil", "quiet": True},
    "farm": {"models": ["in:model"], "data": "in:data", "build_dir": "out:farm", "coordinator": "127.0.0.1:9",
             "quiet": True},
    "plot": {"kind": "tree", "inputs": ["in:model"], "output": "out:t.svg"},
    "dataset": {"name": "irs", "output": "out:irs.csv"},
    "import": {"source": "in:foreign-model", "output": "out:m.json"},
    "tune": {"data": "in:dataset", "target": "native", "algos": "cart", "candidates": "1", "workers": "1",
             "output": "out:best.json", "quiet": True},
}

#: free-text arguments that name no file this command reads or writes
NOT_PATHS = {"delimiter", "algo", "algos", "port", "categorical", "base", "label", "scheduler", "data_dir",
             "name", "features",
             "place", "coordinator", "places", "targets"}     # labgrid place names and the coordinator's address

#: how the standard output of each text output is recognised
STDOUT_CHECKS = {
    "JSON file": lambda text: isinstance(json.loads(text), dict),
    "model file": lambda text: json.loads(text)["format"] == "treegen-model",
    "output file": lambda text: text.splitlines()[0] == "prediction" and len(text.splitlines()) == 151,
    "Markdown file": lambda text: text.startswith("# treegen compare"),
    "JUnit file": lambda text: text.lstrip().startswith("<?xml") and "</testsuite" in text,
}


def _declared(command):
    sub = subparser(PARSER, command)
    outs = [a for a in sub._actions if hasattr(a, "treegen_output")]
    ins = [a for a in sub._actions if hasattr(a, "treegen_input")]
    return sub, outs, ins


def _argv(command, values: dict) -> list:
    sub = subparser(PARSER, command)
    argv, positional = [command], []
    for action in sub._actions:
        if action.dest not in values or values[action.dest] is None:
            continue
        v = values[action.dest]
        vs = v if isinstance(v, list) else [v]
        if not action.option_strings:
            positional += vs
        elif v is True:
            argv.append(action.option_strings[0])
        else:
            argv += [action.option_strings[0], *vs]
    return argv + positional


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One input file of each kind (a model, data, a cv report, compare parameters, a target file) and a
    finished compare results file for the base command line (so compare runs without a cluster)."""
    d = tmp_path_factory.mktemp("rule-inputs")
    (d / "d.csv").write_bytes(gzip.decompress((DATASETS / "irs.csv.gz").read_bytes()))
    from treegen import cli
    assert cli.main(["fit", str(d / "d.csv"), "--algo", "cart", "-q", "-o", str(d / "m.json")]) == 0
    assert cli.main(["cv", str(d / "d.csv"), "--algo", "cart", "--folds", "2", "-q", "--json", str(d / "r.json")]) == 0
    (d / "p.json").write_text('{"cart": {}}\n')
    shutil.copy(ROOT / "targets" / "native.toml", d / "t.toml")
    (d / "lgb.txt").write_text(LIGHTGBM_TEXT)
    return {"model": d / "m.json", "data": d / "d.csv", "model-or-data": d / "m.json", "dataset": d / "d.csv",
            "report": d / "r.json", "params": d / "p.json", "target": d / "t.toml", "foreign-model": d / "lgb.txt"}


#: a one-split LightGBM regression model text (what treegen import reads), written without LightGBM
LIGHTGBM_TEXT = """tree
version=v4
num_class=1
num_tree_per_iteration=1
label_index=0
max_feature_idx=3
objective=regression
feature_names=a b c d
feature_infos=none none none none

Tree=0
num_leaves=2
num_cat=0
split_feature=2
threshold=2.5
decision_type=2
left_child=-1
right_child=-2
leaf_value=1 2
shrinkage=1

end of trees
"""


def _resolve(values: dict, files: dict, into, inputs_dir) -> dict:
    """BASE values with "in:" replaced by a copy of the input in ``inputs_dir`` and "out:" by a path in ``into``."""
    out = {}
    for k, v in values.items():
        vs = v if isinstance(v, list) else [v]
        got = []
        for x in vs:
            if isinstance(x, str) and x.startswith("in:"):
                src = files[x[3:]]
                dst = inputs_dir / src.name
                if not dst.exists():
                    shutil.copy(src, dst)
                got.append(dst)
            elif isinstance(x, str) and x.startswith("out:"):
                got.append(into / x[4:])
            else:
                got.append(x)
        out[k] = got if isinstance(v, list) else got[0]
    return out


def _snapshot(folder) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p)
                                         if p.is_symlink() else None)
            for p in sorted(folder.rglob("*"))}


def _cases():
    for command in COMMANDS:
        _, outs, ins = _declared(command)
        for o in outs:
            for i in ins:
                kind = o.treegen_output[1]
                ways = ("folder", "ancestor", "symlinked-folder") if kind == "folder" else \
                    ("same", "dotted", "hard-link", "symlink")
                for way in ways:
                    yield pytest.param(command, o.dest, i.dest, way, id=f"{command}-{o.dest}-is-{i.dest}-{way}")


@pytest.mark.parametrize("command, out_dest, in_dest, way", list(_cases()))
def test_an_output_never_replaces_an_input(files, tmp_path, capsys, monkeypatch, command, out_dest, in_dest, way):
    monkeypatch.chdir(tmp_path)                         # a wrongly accepted relative output lands here
    sub, outs, ins = _declared(command)
    in_action = next(a for a in ins if a.dest == in_dest)
    work, inputs = tmp_path / "w", tmp_path / "w" / "in"
    inputs.mkdir(parents=True)
    values = dict(BASE[command])
    kind = in_action.treegen_input
    values[in_dest] = [f"in:{kind}"] if in_action.nargs in ("+", "*") else f"in:{kind}"
    values = _resolve(values, files, work, inputs)
    victim = values[in_dest][0] if isinstance(values[in_dest], list) else values[in_dest]
    target = {"same": victim, "dotted": f"{inputs}/./{victim.name}", "folder": inputs, "ancestor": work,
              "hard-link": work / "hard", "symlink": work / "sym", "symlinked-folder": work / "symdir"}[way]
    if way == "hard-link":
        os.link(victim, target)
    elif way == "symlink":
        os.symlink(victim, target)
    elif way == "symlinked-folder":
        os.symlink(inputs, target)
    values[out_dest] = target
    before = _snapshot(work)
    code, out, err = run_cli(capsys, _argv(command, values))
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("treegen: error: "), (code, err[-1500:])
    assert "an input of this command" in lines[0], lines[0]
    assert out == ""                                    # refused before any work: nothing printed
    assert _snapshot(work) == before                    # nothing written, nothing replaced


def test_the_issue_cases(files, tmp_path, capsys):
    """The command lines of the issue, literally."""
    for name in ("m.json", "d.csv", "r.json", "p.json"):
        shutil.copy(files[{"m.json": "model", "d.csv": "data", "r.json": "report", "p.json": "params"}[name]],
                    tmp_path / name)
    (tmp_path / "model.svg").write_bytes((tmp_path / "m.json").read_bytes())
    (tmp_path / "data.png").write_bytes((tmp_path / "d.csv").read_bytes())
    (tmp_path / "r.pdf").write_bytes((tmp_path / "r.json").read_bytes())
    (tmp_path / "X.tasks.jsonl").write_text("")
    (tmp_path / "ex").mkdir()
    (tmp_path / "ex" / "mm.h").write_bytes((tmp_path / "m.json").read_bytes())
    t = tmp_path
    cases = [
        ["plot", "tree", t / "model.svg", "-o", t / "model.svg"],
        ["plot", "confusion", t / "m.json", t / "data.png", "-o", t / "data.png"],
        ["plot", "cv", t / "r.pdf", "-o", t / "r.pdf"],
        ["compare", t / "d.csv", "--algos", "cart", "--json", t / "d.csv"],
        ["compare", t / "d.csv", "--algos", "cart", "--json", t / "o.json", "--results", t / "d.csv"],
        ["compare", t / "d.csv", "--algos", "cart", "--json", t / "X.tasks.jsonl", "--results", t / "X.tasks.jsonl"],
        ["compare", t / "d.csv", "--algos", "cart", "--json", t / "o.json", "--markdown", t / "p.json",
         "--params", t / "p.json"],
        ["compare", "d", "--data-dir", t, "--algos", "cart", "--json", t / "d.csv"],   # found in --data-dir
        ["compare", t / "d.csv", "--algos", "cart", "--json", t / "o.json", "--markdown", t / "o.tasks.jsonl"],
        ["export", t / "d.csv", "--train", "--target", "native", "--json", t / "d.csv", "-o", t / "lib"],
        ["export", t / "ex" / "mm.h", "--target", "native", "-o", t / "ex"],
        ["export", t / "ex" / "mm.h", "--target", "native", "-o", t / "ex", "--name", "mm", "--force"],
        ["targets", "--json", ROOT / "targets" / "native.toml"],           # a shipped target file
        ["export", t / "m.json", "--target", "native", "-o", t / "o", "--json", ROOT / "targets" / "native.toml"],
    ]
    before = _snapshot(t), (ROOT / "targets" / "native.toml").read_bytes()
    for argv in cases:
        code, out, err = run_cli(capsys, argv)
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("treegen: error: "), (argv, code, err)
        assert "an input of this command" in lines[0] or "the same file" in lines[0], (argv, lines[0])
    assert (_snapshot(t), (ROOT / "targets" / "native.toml").read_bytes()) == before


def _stdout_cases():
    for command in COMMANDS:
        _, outs, _ = _declared(command)
        for o in outs:
            yield pytest.param(command, o.dest, id=f"{command}-{o.dest}")


@pytest.fixture(scope="module")
def farm_coordinator(tmp_path_factory):
    """A labgrid farm with one native place (coordinator, exporter, ser2net on 127.0.0.1) for ``treegen farm``."""
    from treegen.device.farm_lab import EmulatedLab, specs

    with EmulatedLab(tmp_path_factory.mktemp("farm-lab"), specs(["native@host"])) as lab:
        yield lab.address


@pytest.mark.parametrize("command, out_dest", list(_stdout_cases()))
def test_dash_is_standard_output_for_text_and_refused_for_the_rest(files, tmp_path, capsys, monkeypatch, command,
                                                                   out_dest, request):
    monkeypatch.chdir(tmp_path)                         # a file or folder called '-' would land here
    sub, outs, _ = _declared(command)
    action = next(a for a in outs if a.dest == out_dest)
    what, kind = action.treegen_output
    (tmp_path / "in").mkdir()
    values = _resolve(dict(BASE[command]), files, tmp_path, tmp_path / "in")
    if command == "compare":           # the finished tasks of the base comparison: no cluster is started
        values["results"] = _compare_results(files, tmp_path)
    if command == "tune" and out_dest != "results":     # the same for tune's search (its costs: native HIL)
        values["results"] = _tune_results(files, tmp_path)
    if command == "farm" and kind == "text":           # a run to its end: a real (one-place) farm
        values["coordinator"] = request.getfixturevalue("farm_coordinator")
        values["bench_iters"] = "10"
    values[out_dest] = "-"
    before = _snapshot(tmp_path)
    code, out, err = run_cli(capsys, _argv(command, values))
    if kind != "text":
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1 and "cannot be standard output ('-')" in lines[0], (code, err)
        assert out == "" and _snapshot(tmp_path) == before
        return
    assert code == 0, err[-2000:]
    assert STDOUT_CHECKS[what](out), out[:500]          # stdout holds the output only (the report is on stderr)
    assert not (tmp_path / "-").exists() and not any(p.name == "-" for p in tmp_path.rglob("*"))


_RESULTS: dict = {}


def _compare_results(files, tmp_path):
    """The results file of BASE['compare'], its tasks computed in this process (learn API, no Dask)."""
    from treegen.core.data import load_csv
    from treegen.learn import compare as C

    if "lines" not in _RESULTS:
        ds = load_csv(files["dataset"])
        data = C.CompareData("d", ds.X, ds.labels)
        tasks = C.plan([data], C.methods_from_spec(["cart"]), folds=2, seed=0)
        _RESULTS["lines"] = "".join(json.dumps(C.run_task(t, data)) + "\n" for t in tasks)
    path = tmp_path / "done.tasks.jsonl"
    path.write_text(_RESULTS["lines"])
    return path


def _tune_results(files, tmp_path):
    """The finished CV tasks of BASE['tune'] (its one candidate, every rung), computed in this process."""
    from treegen.core.data import load_csv
    from treegen.learn import compare as C
    from treegen.learn import tune as T

    if "tune" not in _RESULTS:
        ds = load_csv(files["dataset"])
        data = C.CompareData("d", ds.X, ds.labels)
        methods = T.sample_methods(["cart"], 1, 0)
        tasks = {t.key: t for r in range(len(T.RUNGS)) for t in T.rung_tasks(data, methods, r, 0)}
        _RESULTS["tune"] = "".join(json.dumps(C.run_task(t, data)) + "\n" for t in tasks.values())
    path = tmp_path / "done-tune.tasks.jsonl"
    path.write_text(_RESULTS["tune"])
    return path


def test_two_outputs_to_stdout_are_refused(files, tmp_path, capsys):
    code, out, err = run_cli(capsys, ["fit", files["data"], "--algo", "cart", "-o", "-", "--json", "-"])
    assert code == 2 and err.count("\n") == 1 and "only one output can go to standard output" in err
    assert out == ""


def test_every_path_argument_is_declared():
    """Every subcommand has a base command line here, and every free-text argument is declared as an
    input or an output, or listed as naming no file: a new option cannot escape the rule."""
    assert set(COMMANDS) == set(BASE), "a new subcommand: add its command line to BASE"
    undeclared = []
    for command in COMMANDS:
        for a in subparser(PARSER, command)._actions:
            path_like = a.type in (None, str, pathlib.Path) or isinstance(a.type, argparse.FileType)
            if a.nargs == 0 or not path_like or a.choices or a.dest in ("help", "version"):
                continue
            if not (hasattr(a, "treegen_input") or hasattr(a, "treegen_output")) and a.dest not in NOT_PATHS:
                undeclared.append(f"{command} {'/'.join(a.option_strings) or a.dest}")
    assert not undeclared, f"declare these with treegen.cli.paths.input_/output (or add to NOT_PATHS): {undeclared}"


@pytest.mark.parametrize("command", ["build", "flash", "hil"])
def test_the_default_build_folder_is_checked_too(files, tmp_path, capsys, monkeypatch, command):
    """Without -o, build/flash/hil write build/<model>-<target>: a model kept there is refused as with -o."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "build" / "m-native"
    folder.mkdir(parents=True)
    shutil.copy(files["model"], folder / "m.json")
    target = "native" if command == "hil" else "qemu-m4"
    if command != "hil":
        folder = folder.rename(tmp_path / "build" / "m-qemu-m4")
    argv = [command, folder / "m.json", "--target", target] + (["--data", files["data"]] if command == "hil" else [])
    before = _snapshot(tmp_path)
    code, out, err = run_cli(capsys, argv)
    assert code == 2 and err.count("\n") == 1 and "an input of this command" in err, (code, err)
    assert _snapshot(tmp_path) == before
