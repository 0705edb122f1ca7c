"""compare's results file is validated record by record (issue 24, part A): a hostile or damaged line
is one line naming the file and the line number, exit 2, before any cluster starts, nothing written
— or, with --skip-bad-results, left out with a warning and its task run again; a record is never
used for a task that is not its own (another seed, another setting)."""

from __future__ import annotations

import gzip
import json
import warnings

import pytest

from conftest import run_cli
from rel_util import DATASETS
from treegen.core.data import load_csv
from treegen.core.errors import TreegenError
from treegen.learn import compare as C


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A dataset file and the finished records of ``compare d.csv --algos cart --folds 2`` (computed
    here, task by task, without a cluster)."""
    d = tmp_path_factory.mktemp("results")
    (d / "d.csv").write_bytes(gzip.decompress((DATASETS / "irs.csv.gz").read_bytes()))
    ds = load_csv(d / "d.csv")
    data = C.CompareData("d", ds.X, ds.labels)
    tasks = C.plan([data], C.methods_from_spec(["cart"]), folds=2, seed=0)
    return d, data, tasks, [C.run_task(t, data) for t in tasks]


def _lines(records) -> list[str]:
    return [json.dumps(r) for r in records]


HOSTILE = {   # name -> (change of the second record's line, what the message says)
    "accuracy-text": (lambda r: json.dumps({**r, "accuracy": "high"}), 'accuracy must be a number, got "high"'),
    "repeat-missing": (lambda r: json.dumps({k: v for k, v in r.items() if k != "repeat"}), "field repeat missing"),
    "n_test-zero": (lambda r: json.dumps({**r, "n_test": 0}), "n_test must be >= 1, got 0"),
    "accuracy-nan": (lambda r: json.dumps({**r, "accuracy": float("nan")}), "accuracy must be finite"),
    "accuracy-negative": (lambda r: json.dumps({**r, "accuracy": -0.5}), "accuracy must be a fraction"),
    "fold-float": (lambda r: json.dumps({**r, "fold": 1.0}), "fold must be an integer, got 1.0"),
    "fold-bool": (lambda r: json.dumps({**r, "fold": True}), "fold must be an integer, got true"),
    "leaves-null": (lambda r: json.dumps({**r, "leaves": None}), "leaves must be an integer, got null"),
    "key-number": (lambda r: json.dumps({**r, "key": 7}), "key must be a string"),
    "array": (lambda r: json.dumps([r]), "not a JSON object"),
    "garbage": (lambda r: "{not json", "not valid JSON"),
    "flash-text": (lambda r: json.dumps({**r, "flash_bytes": "big"}), "flash_bytes must be an integer"),
    # the record stored under this task's key, but of another seed / repetition / algorithm
    "other-seed": (lambda r: json.dumps({**r, "seed": r["seed"] + 1}), "has seed"),
    "other-repeat": (lambda r: json.dumps({**r, "repeat": 3}), "has repeat 3"),
    "other-algorithm": (lambda r: json.dumps({**r, "algorithm": "efti"}), 'has algorithm "efti"'),
    "accuracy-not-a-count": (lambda r: json.dumps({**r, "accuracy": 0.5 + 0.5 / r["n_test"] / 3}),
                             "is not a count of"),
    "accuracy-percent": (lambda r: json.dumps({**r, "accuracy": 96.0}), "is not a count of"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_bad_record_is_one_line_naming_its_line(finished, tmp_path, capsys, case):
    d, _, _, records = finished
    change, says = HOSTILE[case]
    lines = _lines(records)
    lines[1] = change(records[1])
    results = tmp_path / "r.tasks.jsonl"
    results.write_text("\n".join(lines) + "\n")
    before = results.read_bytes()
    argv = ["compare", d / "d.csv", "--algos", "cart", "--folds", "2", "-q", "--json", tmp_path / "o.json",
            "--results", results]
    code, out, err = run_cli(capsys, argv)
    errs = err.splitlines()
    assert code == 2 and len(errs) == 1 and errs[0].startswith("treegen: error: "), (code, err[-2000:])
    assert f"results file {results} line 2: " in errs[0] and says in errs[0], errs[0]
    assert "--skip-bad-results" in errs[0]
    assert results.read_bytes() == before and not (tmp_path / "o.json").exists()


def test_skip_bad_results_leaves_the_line_out_so_its_task_runs_again(finished, tmp_path):
    _, _, tasks, records = finished
    lines = _lines(records)
    lines[0] = json.dumps({**records[0], "n_test": 0})
    lines[1] = json.dumps({**records[1], "seed": 99})
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TreegenError, match="line 1: n_test must be >= 1"):
        C.ResultsFile(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = C.ResultsFile(path, skip_bad=True)
        done = store.done(tasks)
    assert done == {}                                 # neither is used: both tasks run again
    assert [s.split(":")[0] for s in store.skipped] == ["line 1", "line 2"]
    said = [str(w.message) for w in caught]
    assert any("skipped 1 bad line(s)" in m and "line 1: n_test" in m for m in said), said
    assert any("skipped 1 bad line(s)" in m and "line 2: the record" in m and "has seed 99" in m for m in said), said
    assert [t.key for t in tasks if t.key not in done] == [t.key for t in tasks]   # pending: run again


def test_records_of_another_seed_or_setting_are_never_used(finished, tmp_path):
    _, data, tasks, records = finished
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(_lines(records)) + "\n")
    assert set(C.ResultsFile(path).done(tasks)) == {t.key for t in tasks}
    for seed, params in ((1, None), (0, {"cart": {"max_depth": 2}})):
        other = C.plan([data], C.methods_from_spec(["cart"], params), folds=2, seed=seed)
        assert C.ResultsFile(path).done(other) == {}, (seed, params)


def test_a_cut_last_line_is_not_a_bad_record(finished, tmp_path):
    """A run killed while writing leaves a last line without its newline: the rerun goes on, and the
    next record replaces the partial line."""
    _, _, tasks, records = finished
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(records[0]) + "\n" + json.dumps(records[1])[:40])
    store = C.ResultsFile(path)
    assert store.cut_line and set(store.done(tasks)) == {tasks[0].key}
    store.add(records[1])
    assert [json.loads(x)["key"] for x in path.read_text().splitlines()] == [tasks[0].key, tasks[1].key]
    path.write_text(json.dumps(records[1])[:40] + "\n" + json.dumps(records[0]) + "\n")   # not last: bad
    with pytest.raises(TreegenError, match="line 1: not valid JSON"):
        C.ResultsFile(path)
