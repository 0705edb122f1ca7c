"""One units rule: every accuracy-like figure in every command's --json is a fraction 0..1
(percent only in the text printed for people)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.conftest import run_cli

#: keys whose numbers are accuracy-like (fractions): accuracy, agreement, precision, recall, F1, AUC, scores
ACCURACY_LIKE = re.compile(r"(accuracy|agreement|precision|recall|(^|_)f1$|auc|score|fixed_vs_float|f32_vs_float)")


def _numbers(key: str, value, path: str) -> list[tuple[str, float]]:
    """The figures under an accuracy-like key: a number, a list of them, a ``{mean, ci95}`` summary,
    a per-class mapping; any other dict is walked for its own accuracy-like keys (e.g. ``agreement``
    holds ``rows`` beside ``fixed_vs_float``)."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [(path, float(value))]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _numbers(key, v, f"{path}[{i}]")]
    if isinstance(value, dict):
        if "mean" in value:
            return [(path, float(value[k])) for k in ("mean", "ci95") if value.get(k) is not None]
        if key.endswith("per_class"):
            return [x for k, v in value.items() for x in _numbers(key, v, f"{path}.{k}")]
        return accuracy_like_values(value, path)
    return []


def accuracy_like_values(doc, path="") -> list[tuple[str, float]]:
    """(path, value) of every number under an accuracy-like key, anywhere in a JSON document."""
    found = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            where = f"{path}.{k}"
            if ACCURACY_LIKE.search(str(k)) and not str(k).endswith(("_rows", "_seconds")):
                found += _numbers(str(k), v, where)
            else:
                found += accuracy_like_values(v, where)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += accuracy_like_values(v, f"{path}[{i}]")
    return found


def test_the_walker_finds_percentages():
    bad = {"a": {"accuracy": {"mean": 93.2, "ci95": 1.0}}, "per_class": [{"precision": 0.5}], "rows_per_s": 300.0}
    assert accuracy_like_values(bad) == [(".a.accuracy", 93.2), (".a.accuracy", 1.0), (".per_class[0].precision", 0.5)]
    assert accuracy_like_values({"agreement": {"rows": 90, "fixed_vs_float": 99.0}}) == \
        [(".agreement.fixed_vs_float", 99.0)]


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory):
    rng = np.random.default_rng(4)
    X = np.round(rng.uniform(0, 10, size=(90, 3)), 3)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 8, "hi", "lo")
    path = tmp_path_factory.mktemp("units") / "d.csv"
    lines = ["a,b,c,label"] + [f"{r[0]},{r[1]},{r[2]},{lab}" for r, lab in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def farm_address(tmp_path_factory):
    """A labgrid farm with one native place (coordinator, exporter, ser2net on 127.0.0.1)."""
    from treegen.device.farm_lab import EmulatedLab, specs

    with EmulatedLab(tmp_path_factory.mktemp("farm-lab"), specs(["native@host"])) as lab:
        yield lab.address


def test_every_command_json_has_fractions(csv_file, tmp_path, capsys, farm_address):
    from treegen.cli.main import build_parser

    d = str(csv_file)
    m, rf = tmp_path / "m.json", tmp_path / "rf.json"
    runs = {
        "fit": ["fit", d, "--algo", "efti", "--max-iter", "500", "-o", m],
        "fit rf": ["fit", d, "--algo", "rf", "--n-trees", "5", "-o", rf],
        "eval": ["eval", m, d],
        "eval rf": ["eval", rf, d],
        "cv": ["cv", d, "--algo", "cart", "--folds", "3"],
        "export": ["export", m, "--target", "cortex-m4", "--data", d, "-o", tmp_path / "c"],
        "export f32": ["export", m, "--target", "cortex-m4", "--dtype", "f32", "--data", d, "-o", tmp_path / "c32"],
        "targets": ["targets"],
        "hil": ["hil", m, "--target", "native", "--data", d, "-o", tmp_path / "hil-native", "--bench-iters", "10"],
        "farm": ["farm", m, "--data", d, "--coordinator", farm_address, "-o", tmp_path / "farm", "--bench-iters", "10",
                 "-q"],
        "compare": ["compare", d, "--algos", "cart", "--folds", "3", "--workers", "1", "-q"],
        "tune": ["tune", d, "--target", "native", "--algos", "cart", "--candidates", "1", "--workers", "1",
                 "-o", tmp_path / "best.json", "-q"],
    }
    # every command that has --json is run here
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    with_json = {name for name, p in sub.choices.items() if any("--json" in a.option_strings for a in p._actions)}
    assert with_json == {r.split()[0] for r in runs}, with_json

    checked, printed = {}, {}
    for name, argv in runs.items():
        js = tmp_path / f"{name.replace(' ', '_')}.json"
        code, out, err = run_cli(capsys, [*argv, "--json", js])
        assert code == 0, (name, err)
        doc = json.loads(js.read_text())
        values = accuracy_like_values(doc)
        bad = [(p, v) for p, v in values if not 0.0 <= v <= 1.0]
        assert not bad, (name, bad)
        checked[name] = values
        printed[name] = (out, doc)
        if name in ("eval", "cv", "fit"):      # ... while the human text keeps percent
            assert "%" in out, (name, out)
    # the keys the rule is about are really there (not a vacuous pass)
    keys = {n: {p for p, _ in v} for n, v in checked.items()}
    assert ".train_accuracy" in keys["fit"] and ".accuracy" in keys["eval"] and ".roc_auc" in keys["eval rf"]
    assert ".accuracy" in keys["cv"] and ".folds[0].accuracy" in keys["cv"]
    assert ".agreement.fixed_vs_float" in keys["export"] and ".agreement.accuracy_fixed" in keys["export"]
    assert ".agreement.f32_vs_float" in keys["export f32"]
    assert ".float_agreement" in keys["hil"] and ".accuracy" in keys["hil"]
    assert ".cells[0].accuracy" in keys["farm"] and ".cells[0].float_agreement" in keys["farm"]
    assert ".records[0].accuracy" in keys["compare"] and ".summary.scores[0][0]" in keys["compare"]
    assert ".info.oob_score" in keys["fit rf"]
    assert keys["targets"] == set()
    assert ".points[0].accuracy" in keys["tune"], sorted(keys["tune"])

    # plain words in the same runs: layout and variant as the user types them, no jargon
    out, doc = printed["hil"]
    assert (doc["layout"], doc["variant"]) == ("table", "scalar") and doc["device"]["variant"] == "q15-table-scalar"
    assert "layout table, variant scalar" in out and "rows per request" in out and "max_batch" not in out
    out, _ = printed["export"]
    assert "quantisation    no data rows of --data take another branch than in the float model" in out
    assert "unresolved" not in out and "estimated size" in out
