"""`treegen compare --runs-per-fold R --pick median|best-train`: every run one task of the results file
(a cut run resumes from the finished runs), both picks from one results file, one run per fold as
before (its records are the runs 0), shown in the JSON and the Markdown; bad values are one line."""

from __future__ import annotations

import json

from tests.conftest import DATASETS, assert_user_error, run_cli
from treegen.learn.compare import strip_timing


def _compare(capsys, tmp_path, out: str, *extra) -> dict:
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"gp": {"max_iter": 40, "population": 10}}))
    code, _, err = run_cli(capsys, ["compare", "irs", "--data-dir", DATASETS, "--algos", "gp,cart", "--params", params,
                                    "--folds", "2", "--seed", "3", "--workers", "1", "-q", "--results",
                                    tmp_path / "runs.jsonl", "--json", tmp_path / f"{out}.json", "--markdown",
                                    tmp_path / f"{out}.md", *extra])
    assert code == 0, err
    return json.loads((tmp_path / f"{out}.json").read_text())


def test_runs_per_fold_resume_picks_and_one_run(capsys, tmp_path):
    a = _compare(capsys, tmp_path, "a", "--runs-per-fold", "3")
    assert (a["runs_per_fold"], a["pick"], a["deterministic"]) == (3, "median", ["cart"])
    assert a["n_tasks"] == a["n_tasks_run"] == 2 * 3 + 2 and len(a["run_records"]) == 8 and len(a["records"]) == 4
    for r in (r for r in a["records"] if r["method"] == "gp"):
        assert r["accuracy"] == sorted(r["run_accuracies"])[1] and r["picked_run"] is None
    md = (tmp_path / "a.md").read_text()
    assert "Runs per fold: 3" in md and "the median test accuracy of its runs" in md and "one run per fold: cart" in md
    assert "--runs-per-fold 3 --pick median" in a["command"]

    # a run cut short (the last two runs' lines lost) and a record of an older treegen (no training
    # accuracy): best-train runs those three again, with the same records
    path = tmp_path / "runs.jsonl"
    lines = path.read_text().splitlines(keepends=True)[:-2]
    old = next(i for i, line in enumerate(lines) if '"algorithm": "gp"' in line)
    lines[old] = json.dumps({k: v for k, v in json.loads(lines[old]).items() if k != "train_accuracy"}) + "\n"
    path.write_text("".join(lines))
    b = _compare(capsys, tmp_path, "b", "--runs-per-fold", "3", "--pick", "best-train")
    assert b["n_tasks_run"] == 3
    key = lambda r: r["key"]  # noqa: E731
    assert strip_timing(sorted(b["run_records"], key=key)) == strip_timing(sorted(a["run_records"], key=key))
    for r in (r for r in b["records"] if r["method"] == "gp"):
        best = max(range(3), key=lambda i: (r["run_train_accuracies"][i], -i))
        assert r["picked_run"] == best and r["accuracy"] == r["run_accuracies"][best]
    assert "best training accuracy" in (tmp_path / "b.md").read_text()

    # one run per fold: today's tasks, all found (the runs 0), the output as before runs per fold
    c = _compare(capsys, tmp_path, "c")
    assert c["n_tasks_run"] == 0 and c["runs_per_fold"] == 1 and "run_records" not in c
    run0 = [r for r in a["run_records"] if r["run"] == 0]
    assert strip_timing(c["records"]) == strip_timing(run0)
    assert "Runs per fold" not in (tmp_path / "c.md").read_text() and "--runs-per-fold" not in c["command"]


def test_runs_per_fold_bad_values(capsys, tmp_path):
    base = ["compare", "irs", "--data-dir", DATASETS, "--algos", "cart", "--json", tmp_path / "o.json"]
    assert_user_error(capsys, [*base, "--runs-per-fold", "0"], "--runs-per-fold")
    assert_user_error(capsys, [*base, "--runs-per-fold", "1001"], "--runs-per-fold")
    assert_user_error(capsys, [*base, "--pick", "mean"], "--pick")
    assert not (tmp_path / "o.json").exists()
