"""Corrupt model files through the CLI (show, eval, predict, hil, export): one line
``treegen: error: MODEL: <field>: <problem>``, exit 2, never a traceback.

The corpus: the cases of issue 10 by name, a 5000-digit integer, 100,000 nested arrays, and 32
generated mutations that are invalid by construction (a hostile value in an integer, count or
scale field)."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from conftest import run_cli
from corrupt_models import NAMED, _parent, deep_nesting_case, huge_integer_case, named_case, small_model

INT_FIELDS = [("trees", 0, "left", 0), ("trees", 0, "right", 2), ("trees", 0, "leaf_class", 4),
              ("trees", 0, "class_counts", 3, 1)]
BAD_INTS = [3_000_000_000, 10**26, 10**30, 2**63, 1.5, -7, True, None, "1", [2]]
SCALE_FIELDS = [("scaling", "scale", 0), ("scaling", "scale", 1)]
BAD_SCALES = [-1.0, -1e-300, "0.5", None, [0.5], 1e301]


def generated_cases(n: int = 32) -> dict:
    pairs = list(itertools.product(INT_FIELDS, BAD_INTS)) + list(itertools.product(SCALE_FIELDS, BAD_SCALES))
    random.Random(10).shuffle(pairs)
    cases = {}
    for path, value in pairs[:n]:
        d = small_model().to_dict()
        _parent(d, path)[path[-1]] = value
        cases[f"{'.'.join(map(str, path))}={value!r}"[:60]] = (json.dumps(d), path)
    return cases


GENERATED = generated_cases()
CORPUS = {**{name: named_case(name) for name in NAMED},
          "5000-digit integer": huge_integer_case(),
          "100000 nested arrays": deep_nesting_case(),
          **{name: text for name, (text, _) in GENERATED.items()}}


def _field_text(path) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else k)
    return out


def test_corpus_size():
    assert len(CORPUS) >= 30 + len(NAMED)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "d.csv"
    path.write_text("a,b,c,label\n0.5,0.2,2,1\n1,0,2,2\n3,1,2,three\n")
    return path


@pytest.mark.parametrize("case", list(CORPUS))
def test_corrupt_model_is_one_line_error(tmp_path, capsys, data_file, case):
    model = tmp_path / "bad.json"
    model.write_text(CORPUS[case])
    commands = [["show", model], ["eval", model, data_file], ["predict", model, data_file],
                ["hil", model, "--target", "native", "--data", data_file, "-o", tmp_path / "build"],
                ["export", model, "--target", "native", "-o", tmp_path / "c"]]
    for argv in commands:
        code, out, err = run_cli(capsys, argv)
        assert code == 2, (argv[0], code, out, err[-2000:])
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"treegen: error: {model}: "), (argv[0], err[-2000:])
        assert "Traceback" not in err
        if case in GENERATED:
            assert f": {_field_text(GENERATED[case][1])}: " in lines[0], lines[0]
    assert not (tmp_path / "build").exists() and not (tmp_path / "c").exists()


def test_named_cases_name_the_field(tmp_path, capsys):
    for name, (path, _) in NAMED.items():
        model = tmp_path / "bad.json"
        model.write_text(named_case(name))
        code, _, err = run_cli(capsys, ["show", model])
        assert code == 2
        field = _field_text(path)
        assert f"{model}: {field}" in err, (name, err)
