"""treegen.cli (in-process) and treegen.core.progress; one subprocess test of the installed console script.

Most tests replace the inducers with a fast stand-in (same parameters as the real estimators), so
they test the command line only; the tests at the end run the real EFTI and CART inducers.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error, run_cli

from treegen import cli
from treegen.cli import models as cli_models
from treegen.core import progress
from treegen.core.model import load
from treegen.core.tree import LEAF, Tree
from treegen.learn.estimators import ALGORITHMS, CARTClassifier, EFTIClassifier


# ---------------------------------------------------------------------- stand-in inducers
def _stump(X, y, n_classes):
    w = np.zeros((3, X.shape[1]))
    w[0, 0] = 1.0
    thr = np.zeros(3)
    thr[0] = float(np.median(X[:, 0]))
    tree = Tree(w, thr, [1, LEAF, LEAF], [2, LEAF, LEAF], [0, 0, 0], np.zeros((3, n_classes), dtype=np.int64))
    return tree.refit_counts(X, y)


class FakeEFTI(EFTIClassifier):
    def _induce(self, X, y, n_classes):
        if self.callback:
            self.callback(0, 0.5, 1, 0.5)
            self.callback(self.max_iter, 0.9, 2, 0.9)
        return _stump(X, y, n_classes), {"fitness": 0.9, "iterations": self.max_iter}


class FakeCART(CARTClassifier):
    def _induce(self, X, y, n_classes):
        return _stump(X, y, n_classes), {}


@pytest.fixture
def fake_algos(monkeypatch):
    monkeypatch.setitem(ALGORITHMS, "efti", FakeEFTI)
    monkeypatch.setitem(ALGORITHMS, "cart", FakeCART)


# ---------------------------------------------------------------------- data helpers
def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def toy_rows(n_per_class=10, classes=(1, 2, 3)):
    rng = np.random.default_rng(0)
    rows = []
    for k, c in enumerate(classes):
        for _ in range(n_per_class):
            rows.append([round(float(10 * k + rng.random()), 4), round(float(rng.random()), 4), c])
    return rows


@pytest.fixture
def toy(tmp_path) -> Path:
    return write_csv(tmp_path / "toy.csv", ["len", "width", "class"], toy_rows())


@pytest.fixture
def model_file(tmp_path, toy, fake_algos, capsys) -> Path:
    out = tmp_path / "model.json"
    assert cli.main(["fit", str(toy), "--algo", "cart", "-o", str(out)]) == 0
    capsys.readouterr()
    return out


run = run_cli


# ---------------------------------------------------------------------- fit
def test_fit_writes_model_summary_and_json(tmp_path, toy, fake_algos, capsys):
    out, js = tmp_path / "m.json", tmp_path / "fit.json"
    code, stdout, err = run(capsys, ["fit", toy, "--algo", "efti", "--max-iter", 50, "--seed", 3,
                                     "--oversize-weight", 0.02, "--max-depth", 4, "-o", out, "--json", js])
    assert code == 0, err
    assert err == ""
    assert "train accuracy" in stdout and "leaves          2" in stdout and "depth           1" in stdout
    model = load(out)
    assert model.feature_names == ["len", "width"]
    assert model.classes == [1, 2, 3]
    assert model.metadata["algorithm"] == "efti"
    assert model.metadata["params"]["max_iter"] == 50
    assert model.metadata["params"]["oversize_weight"] == 0.02
    assert model.metadata["params"]["max_depth"] == 4
    assert model.metadata["seed"] == 3
    assert "callback" not in model.metadata["params"]
    figures = json.loads(js.read_text())
    assert figures["command"] == "fit" and figures["algorithm"] == "efti"
    assert figures["leaves"] == 2 and figures["depth"] == 1
    assert 0 <= figures["train_accuracy"] <= 1              # fractions in JSON, as in the model metadata
    assert figures["train_accuracy"] == model.metadata["train_accuracy"]
    assert figures["params"]["random_state"] == 3


def test_fit_cart_options_and_label_column(tmp_path, fake_algos, capsys):
    rows = [[r[2], r[0], r[1]] for r in toy_rows(classes=("a", "b", "c"))]
    data = write_csv(tmp_path / "lab_first.csv", ["species", "len", "width"], rows)
    out = tmp_path / "m.json"
    code, stdout, err = run(capsys, ["fit", data, "--algo", "cart", "--label", "species", "--criterion", "entropy",
                                     "--max-depth", 3, "--min-samples-leaf", 2, "--ccp-alpha", 0.01,
                                     "--scaling", "minmax", "-o", out])
    assert code == 0, err
    model = load(out)
    assert model.feature_names == ["len", "width"] and model.classes == ["a", "b", "c"]
    p = model.metadata["params"]
    assert (p["criterion"], p["max_depth"], p["min_samples_leaf"], p["ccp_alpha"]) == ("entropy", 3, 2, 0.01)
    assert model.scaling.method == "minmax"


def test_fit_progress_bar_driven_by_callback(tmp_path, toy, fake_algos, capsys, monkeypatch):
    class TTY(io.StringIO):
        def isatty(self):
            return True

    bars = []

    def eager_bar(*args, **kwargs):  # redraw on every update, so the test sees each step
        bars.append(progress.progress_bar(*args, mininterval=0, miniters=1, **kwargs))
        return bars[-1]

    tty = TTY()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(cli_models, "progress_bar", eager_bar)
    code = cli.main(["fit", str(toy), "--algo", "efti", "--max-iter", "40", "-o", str(tmp_path / "m.json")])
    assert code == 0
    drawn = tty.getvalue()
    assert "efti fit" in drawn and "40/40" in drawn and "leaves=2" in drawn
    assert bars[0].n == 40
    # --quiet: no bar at all
    tty.seek(0)
    tty.truncate()
    assert cli.main(["fit", str(toy), "--algo", "efti", "--max-iter", "40", "--quiet",
                     "-o", str(tmp_path / "m2.json")]) == 0
    assert tty.getvalue() == ""


# ---------------------------------------------------------------------- predict / eval / show
def test_predict_stdout_and_file(tmp_path, toy, model_file, capsys):
    code, out, err = run(capsys, ["predict", model_file, toy])
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "prediction" and len(lines) == 31
    assert set(lines[1:]) <= {"1", "2", "3"}
    # features only (no label column) gives the same predictions
    rows = [r[:2] for r in toy_rows()]
    nolabel = write_csv(tmp_path / "nolabel.csv", ["len", "width"], rows)
    dest = tmp_path / "pred.csv"
    code, out2, err = run(capsys, ["predict", model_file, nolabel, "-o", dest])
    assert code == 0 and out2 == "" and err == ""
    assert dest.read_text().splitlines() == lines


def test_eval_table_and_json(tmp_path, toy, model_file, capsys):
    js = tmp_path / "eval.json"
    code, out, err = run(capsys, ["eval", model_file, toy, "--json", js])
    assert code == 0 and err == ""
    assert "accuracy" in out and "confusion matrix" in out and "precision" in out and "macro avg" in out
    figures = json.loads(js.read_text())
    assert figures["command"] == "eval"
    assert figures["classes"] == [1, 2, 3]
    cm = np.array(figures["confusion_matrix"])
    assert cm.shape == (3, 3) and cm.sum() == 30 and cm.sum(axis=1).tolist() == [10, 10, 10]
    assert figures["accuracy"] == pytest.approx(np.trace(cm) / 30)
    assert [c["support"] for c in figures["per_class"]] == [10, 10, 10]
    assert all(0 <= c["f1"] <= 1 for c in figures["per_class"])


def test_eval_with_class_unknown_to_model(tmp_path, model_file, capsys):
    data = write_csv(tmp_path / "extra.csv", ["len", "width", "class"], toy_rows(2) + [[5.0, 0.5, 9]])
    js = tmp_path / "e.json"
    code, out, err = run(capsys, ["eval", model_file, data, "--json", js])
    assert code == 0, err
    assert "not known to the model: 9" in out
    figures = json.loads(js.read_text())
    assert figures["classes"] == [1, 2, 3, 9]
    assert figures["per_class"][3]["recall"] == 0.0


def test_show_text_and_dot(model_file, capsys):
    code, out, err = run(capsys, ["show", model_file])
    assert code == 0 and err == ""
    assert out.startswith("model: cart") and "├── yes:" in out
    assert "raw input units" in out and ("len < " in out or "len >= " in out)   # float data: the raw boundary
    code, out, err = run(capsys, ["show", model_file, "--units", "normalised"])
    assert code == 0 and "len <= 0." in out
    code, out, err = run(capsys, ["show", model_file, "--dot"])
    assert code == 0 and out.startswith("digraph treegen {") and out.count("->") == 2


# ---------------------------------------------------------------------- cv
def test_cv_prints_mean_ci_and_writes_json(tmp_path, toy, fake_algos, capsys):
    js = tmp_path / "cv.json"
    argv = ["cv", toy, "--algo", "efti", "--max-iter", 20, "--folds", 3, "--repeats", 2, "--seed", 5, "--json", js]
    code, out, err = run(capsys, argv)
    assert code == 0 and err == ""
    assert "accuracy" in out and "±" in out and "leaves     2.00 ± 0.00" in out
    res = json.loads(js.read_text())
    assert (res["folds_k"], res["repeats"], res["seed"], res["algorithm"]) == (3, 2, 5, "efti")
    assert len(res["folds"]) == 6 and res["params"]["max_iter"] == 20
    assert set(res["accuracy"]) == {"mean", "ci95"}
    assert f"{100 * res['accuracy']['mean']:.2f} ± {100 * res['accuracy']['ci95']:.2f} %" in out
    # same seed -> same folds
    js2 = tmp_path / "cv2.json"
    assert run(capsys, argv[:-1] + [js2])[0] == 0
    strip = lambda r: [{k: v for k, v in f.items() if k != "train_seconds"} for f in r["folds"]]  # noqa: E731
    assert strip(json.loads(js2.read_text())) == strip(res)


def test_cv_small_class_warning_is_one_line(tmp_path, fake_algos, capsys):
    rows = toy_rows(10, classes=(1, 2)) + [[25.0, 0.5, 3], [25.5, 0.1, 3]]
    data = write_csv(tmp_path / "small.csv", ["a", "b", "class"], rows)
    code, out, err = run(capsys, ["cv", data, "--algo", "cart", "--folds", 3])
    assert code == 0
    assert err.splitlines() == ["treegen: warning: the least populated class has only 2 member(s), fewer than "
                                "folds=3"]


# ---------------------------------------------------------------------- user errors: exit 2, one line
def test_error_missing_data_file(tmp_path, fake_algos, capsys):
    assert_user_error(capsys, ["fit", tmp_path / "nope.csv", "--algo", "cart", "-o", tmp_path / "m.json"],
                      "not found")


def test_error_empty_data_file(tmp_path, fake_algos, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert_user_error(capsys, ["fit", empty, "--algo", "cart", "-o", tmp_path / "m.json"], "empty")
    header_only = write_csv(tmp_path / "h.csv", ["a", "class"], [])
    assert_user_error(capsys, ["cv", header_only, "--algo", "cart"], "no data rows")


def test_error_non_numeric_cell(tmp_path, fake_algos, capsys):
    rows = toy_rows()
    rows[4][1] = "abc"
    data = write_csv(tmp_path / "bad.csv", ["a", "b", "class"], rows)
    assert_user_error(capsys, ["fit", data, "--algo", "cart", "-o", tmp_path / "m.json"], "non-numeric")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_error_nan_inf_cell(tmp_path, fake_algos, capsys, value):
    rows = toy_rows()
    rows[2][0] = value
    data = write_csv(tmp_path / "bad.csv", ["a", "b", "class"], rows)
    assert_user_error(capsys, ["fit", data, "--algo", "efti", "-o", tmp_path / "m.json"],
                      "is NaN (a missing value)" if value == "nan" else "NaN or infinite")


def test_error_single_class(tmp_path, fake_algos, capsys):
    data = write_csv(tmp_path / "one.csv", ["a", "b", "class"], toy_rows(5, classes=(7,)))
    assert_user_error(capsys, ["fit", data, "--algo", "cart", "-o", tmp_path / "m.json"], "single class")
    assert_user_error(capsys, ["cv", data, "--algo", "cart"], "single class")


def test_error_more_features_than_model(tmp_path, model_file, capsys):
    wide = write_csv(tmp_path / "wide.csv", ["a", "b", "c", "d", "class"],
                     [[1, 2, 3, 4, 1], [2, 3, 4, 5, 2]])
    assert_user_error(capsys, ["predict", model_file, wide], "the model expects 2")
    assert_user_error(capsys, ["eval", model_file, wide], "the model expects 2")


def test_error_eval_without_labels(tmp_path, model_file, capsys):
    nolabel = write_csv(tmp_path / "nolabel.csv", ["len", "width"], [[1, 2], [3, 4]])
    assert_user_error(capsys, ["eval", model_file, nolabel], "no label column")


def test_error_unknown_label_column(toy, tmp_path, fake_algos, capsys):
    assert_user_error(capsys, ["fit", toy, "--algo", "cart", "--label", "species", "-o", tmp_path / "m.json"],
                      "label column 'species' not found")


def test_error_unknown_algorithm(toy, tmp_path, capsys):
    assert_user_error(capsys, ["fit", toy, "--algo", "c45", "-o", tmp_path / "m.json"], "unknown algorithm 'c45'")
    assert_user_error(capsys, ["cv", toy, "--algo", "c45"], "unknown algorithm")


@pytest.mark.parametrize("argv,match", [
    (["fit", "{toy}", "--algo", "efti", "--max-iter", "-5", "-o", "{tmp}/m.json"], "--max-iter"),
    (["fit", "{toy}", "--algo", "efti", "--max-iter", "many", "-o", "{tmp}/m.json"], "--max-iter"),
    (["fit", "{toy}", "--algo", "efti", "--oversize-weight", "-0.1", "-o", "{tmp}/m.json"], "--oversize-weight"),
    (["fit", "{toy}", "--algo", "efti", "--oversize-weight", "nan", "-o", "{tmp}/m.json"], "--oversize-weight"),
    (["fit", "{toy}", "--algo", "cart", "--max-depth", "0", "-o", "{tmp}/m.json"], "--max-depth"),
    (["fit", "{toy}", "--algo", "cart", "--min-samples-leaf", "0", "-o", "{tmp}/m.json"], "--min-samples-leaf"),
    (["fit", "{toy}", "--algo", "cart", "--ccp-alpha", "-1", "-o", "{tmp}/m.json"], "--ccp-alpha"),
    (["fit", "{toy}", "--algo", "cart", "--criterion", "mse", "-o", "{tmp}/m.json"], "--criterion"),
    (["fit", "{toy}", "--algo", "cart", "--scaling", "log", "-o", "{tmp}/m.json"], "--scaling"),
    (["fit", "{toy}", "--algo", "cart", "--seed", "-1", "-o", "{tmp}/m.json"], "--seed"),
    (["fit", "{toy}", "--algo", "cart"], "required: -o"),
    (["fit", "{toy}", "-o", "{tmp}/m.json"], "--algo"),
    (["cv", "{toy}", "--algo", "cart", "--folds", "1"], "--folds"),
    (["cv", "{toy}", "--algo", "cart", "--folds", "31"], "exceeds the number of rows (30)"),
    (["cv", "{toy}", "--algo", "cart", "--repeats", "0"], "--repeats"),
    (["cv", "{toy}", "--algo", "cart", "--jobs", "0"], "--jobs"),
    (["fit", "{toy}", "--algo", "cart", "--max-iter", "10", "-o", "{tmp}/m.json"],
     "--max-iter does not apply to --algo cart"),
    (["fit", "{toy}", "--algo", "efti", "--criterion", "gini", "-o", "{tmp}/m.json"],
     "--criterion does not apply to --algo efti"),
    (["cv", "{toy}", "--algo", "efti", "--ccp-alpha", "0.1"], "--ccp-alpha does not apply"),
    (["fit", "{toy}", "--algo", "cart", "--scaling", "q15", "-o", "{tmp}/m.json"], "q15"),
    (["frobnicate"], "invalid choice"),
    (["show"], "required"),
])
def test_error_bad_options(argv, match, toy, tmp_path, fake_algos, capsys):
    argv = [a.format(toy=toy, tmp=tmp_path) for a in argv]
    assert_user_error(capsys, argv, match)
    assert not (tmp_path / "m.json").exists()


def test_bare_treegen_prints_the_overview(capsys):
    code, out, err = run(capsys, [])
    assert code == 0 and err == ""
    assert out.startswith("usage: treegen") and "fit" in out and "hil" in out


def test_error_unwritable_outputs(tmp_path, toy, model_file, fake_algos, capsys):
    missing_dir = tmp_path / "no" / "such" / "dir"
    assert_user_error(capsys, ["fit", toy, "--algo", "cart", "-o", missing_dir / "m.json"], "cannot write model")
    assert_user_error(capsys, ["fit", toy, "--algo", "cart", "-o", tmp_path], "is a directory")
    assert_user_error(capsys, ["fit", toy, "--algo", "cart", "-o", tmp_path / "m.json",
                               "--json", missing_dir / "f.json"], "cannot write JSON")
    assert_user_error(capsys, ["predict", model_file, toy, "-o", missing_dir / "p.csv"], "cannot write output")
    assert_user_error(capsys, ["eval", model_file, toy, "--json", tmp_path], "is a directory")
    assert_user_error(capsys, ["cv", toy, "--algo", "cart", "--json", missing_dir / "cv.json"], "cannot write JSON")


def test_error_unwritable_output_at_write_time(tmp_path, toy, fake_algos, capsys, monkeypatch):
    # the early check passes but the write itself fails (e.g. disk full, permissions as non-root)
    import treegen.cli.paths as cli_paths
    monkeypatch.setattr(cli_paths, "check_paths", lambda outputs, inputs=(): None)
    assert_user_error(capsys, ["fit", toy, "--algo", "cart", "-o", tmp_path / "x" / "m.json"], "cannot write")
    assert_user_error(capsys, ["fit", toy, "--algo", "cart", "-o", tmp_path / "m.json", "--json", tmp_path],
                      "cannot write JSON file")


def test_error_model_files(tmp_path, toy, model_file, capsys):
    missing = tmp_path / "missing.json"
    assert_user_error(capsys, ["show", missing], "model file not found")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "treegen-model", "format_ver')
    assert_user_error(capsys, ["predict", corrupt, toy], "not valid JSON")
    d = json.loads(model_file.read_text())
    d["format_version"] = 99
    future = tmp_path / "future.json"
    future.write_text(json.dumps(d))
    assert_user_error(capsys, ["eval", future, toy], "unsupported model format version 99")
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    assert_user_error(capsys, ["show", other], "not a treegen model")
    d = json.loads(model_file.read_text())
    d["trees"][0]["left"][0] = 7
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(d))
    assert_user_error(capsys, ["show", broken, "--dot"], "broken.json: trees[0].left[0]: child index 7 is out of range")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert_user_error(capsys, ["show", binary], "model")


def test_keyboard_interrupt_exits_130(toy, tmp_path, fake_algos, capsys, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_models, "load_csv", interrupted)
    code, out, err = run(capsys, ["fit", toy, "--algo", "cart", "-o", tmp_path / "m.json"])
    assert code == 130
    assert err.splitlines() == ["treegen: interrupted"]


def test_unexpected_exception_is_not_hidden(toy, tmp_path, fake_algos, monkeypatch):
    def bug(*a, **k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli_models, "load_csv", bug)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["fit", str(toy), "--algo", "cart", "-o", str(tmp_path / "m.json")])


def test_help_and_version(capsys):
    code, out, err = run(capsys, ["--help"])
    assert code == 0 and "fit" in out and "cv" in out
    code, out, err = run(capsys, ["fit", "--help"])
    assert code == 0 and "--max-iter" in out and "--ccp-alpha" in out
    code, out, err = run(capsys, ["--version"])
    assert code == 0 and out.startswith("treegen ")


# ---------------------------------------------------------------------- progress helper
def test_progress_enabled_only_on_tty():
    class TTY(io.StringIO):
        def isatty(self):
            return True

    assert progress.enabled(stream=TTY())
    assert not progress.enabled(quiet=True, stream=TTY())
    assert not progress.enabled(stream=io.StringIO())
    tty = TTY()
    with progress.progress_bar(total=3, desc="work", stream=tty) as bar:
        bar.update(3)
    assert "work" in tty.getvalue()
    plain = io.StringIO()
    with progress.progress_bar(total=3, desc="work", stream=plain) as bar:
        bar.update(3)
    assert plain.getvalue() == ""


# ---------------------------------------------------------------------- real inducers and shared data
def test_real_inducers_on_shared_dataset(tmp_path, datasets_dir, capsys):
    data = datasets_dir / "irs.csv.gz"
    for algo, extra in (("cart", []), ("efti", ["--max-iter", "2000"])):
        out = tmp_path / f"{algo}.json"
        js = tmp_path / f"{algo}-fit.json"
        code, stdout, err = run(capsys, ["fit", data, "--algo", algo, *extra, "--seed", "1", "-o", out,
                                         "--json", js])
        assert code == 0, err
        assert load(out).feature_names == ["a0", "a1", "a2", "a3"]
        assert json.loads(js.read_text())["train_accuracy"] > 0.8
        code, stdout, err = run(capsys, ["eval", out, data])
        assert code == 0 and "accuracy" in stdout
        code, stdout, err = run(capsys, ["predict", out, data])
        assert code == 0 and len(stdout.splitlines()) == 151
        code, stdout, err = run(capsys, ["show", out])
        assert code == 0 and stdout.startswith(f"model: {algo}")
    js = tmp_path / "cv.json"
    code, stdout, err = run(capsys, ["cv", data, "--algo", "cart", "--folds", 5, "--repeats", 2, "--jobs", 2,
                                     "--json", js])
    assert code == 0, err
    assert json.loads(js.read_text())["accuracy"]["mean"] > 0.85
    code, stdout, err = run(capsys, ["cv", data, "--algo", "efti", "--max-iter", 300, "--folds", 3])
    assert code == 0, err
    assert "accuracy" in stdout


def test_console_script_subprocess(tmp_path, datasets_dir):
    exe = shutil.which("treegen")
    cmd = [exe] if exe else [sys.executable, "-m", "treegen"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    proc = subprocess.run(cmd + ["--help"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0 and "usage: treegen" in proc.stdout
    out = tmp_path / "m.json"
    proc = subprocess.run(cmd + ["fit", str(datasets_dir / "irs.csv.gz"), "--algo", "cart", "-o", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "train accuracy" in proc.stdout and out.is_file()
    proc = subprocess.run([sys.executable, "-m", "treegen", "show", str(tmp_path / "missing.json")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"treegen: error: model file not found: {tmp_path / 'missing.json'}"]


def test_every_algorithm_option_shows_its_default(capsys):
    """--help of fit and cv names a default for every algorithm option (read from the estimators'
    signatures where the help text does not state one)."""
    import re

    from treegen.cli.models import ALGO_OPTIONS

    for command in ("fit", "cv"):
        code, out, _ = run(capsys, [command, "--help"])
        assert code == 0
        entries, current = {}, None
        for line in out.splitlines():
            m = re.match(r"^  (?:-\w, )?(--[\w-]+)", line)
            if m:
                current = m.group(1)
                entries[current] = line
            elif current is not None and line.startswith("   "):
                entries[current] += " " + line.strip()
            else:
                current = None
        for dest, (flag, _param) in ALGO_OPTIONS.items():
            assert flag in entries, f"{command}: {flag} not in --help"
            assert "default" in entries[flag], f"{command} {flag}: no default in its help: {entries[flag]}"
    code, out, _ = run(capsys, ["fit", "--help"])
    assert "efti 8" in " ".join(out.split())          # EFTI's max_depth, from its signature


def test_columns_are_matched_by_name(tmp_path, model_file, capsys):
    """Reordered columns are reordered back (same predictions); renamed ones are an error naming the
    missing and unexpected columns; --ignore-names matches by position."""
    rows = toy_rows()
    code, out, _ = run(capsys, ["predict", model_file, tmp_path / "toy.csv"])
    assert code == 0
    reference = out
    swapped = write_csv(tmp_path / "swapped.csv", ["width", "len", "class"], [[r[1], r[0], r[2]] for r in rows])
    code, out, err = run(capsys, ["predict", model_file, swapped])
    assert code == 0, err
    assert out == reference                            # the model read len as len, width as width
    code, out, err = run(capsys, ["predict", model_file, swapped, "--ignore-names"])
    assert code == 0 and out != reference              # by position: len and width exchanged
    renamed = write_csv(tmp_path / "renamed.csv", ["width", "length", "class"], [[r[1], r[0], r[2]] for r in rows])
    line = assert_user_error(capsys, ["eval", model_file, renamed], "do not match the model's features")
    assert "missing len" in line and "unexpected length" in line and "--ignore-names" in line
    code, out, err = run(capsys, ["eval", model_file, renamed, "--ignore-names"])
    assert code == 0, err


def test_delimiter_and_no_header(tmp_path, model_file, fake_algos, capsys):
    """--delimiter (';', 'tab') and --no-header read the same rows as the plain CSV: same model, same
    predictions; a header-less file is matched to the model by position."""
    rows = toy_rows()
    ref_model = tmp_path / "ref.json"
    assert run(capsys, ["fit", tmp_path / "toy.csv", "--algo", "cart", "-o", ref_model])[0] == 0
    semi = tmp_path / "toy_semi.csv"
    semi.write_text("len;width;class\n" + "".join(";".join(map(str, r)) + "\n" for r in rows))
    tabbed = tmp_path / "toy.tsv"
    tabbed.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))        # no header
    for data, extra in ((semi, ["--delimiter", ";"]), (tabbed, ["--delimiter", "tab", "--no-header"])):
        out = tmp_path / f"{data.stem}.json"
        code, _, err = run(capsys, ["fit", data, "--algo", "cart", "-o", out, *extra])
        assert code == 0, err
        assert load(out).tree.equals(load(ref_model).tree)
    code, reference, _ = run(capsys, ["predict", ref_model, tmp_path / "toy.csv"])
    code, out, err = run(capsys, ["predict", ref_model, tabbed, "--delimiter", "tab", "--no-header"])
    assert code == 0 and out == reference, err
    assert_user_error(capsys, ["predict", ref_model, tabbed, "--no-header", "--delimiter", "tab", "--label", "x"],
                      "without a header")
    assert_user_error(capsys, ["fit", semi, "--algo", "cart", "-o", tmp_path / "m.json", "--delimiter", "ab"],
                      "one character")
