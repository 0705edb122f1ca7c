"""Every numeric option is bounded by what the machine and the model format hold, with the bound in
the one-line message; the model file's writer and reader share one set of limits; the data readers
refuse what they cannot hold (issue 24: bounded everything). The bounds: treegen.core.limits."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_user_error
from rel_util import one_error_line, run
from treegen.core import limits
from treegen.core.data import load_csv
from treegen.core.errors import DataError, ModelFileError, TreegenError
from treegen.core.model import Model, load, save
from treegen.learn.estimators import make_estimator


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    path = tmp_path_factory.mktemp("limits") / "toy.csv"
    rng = np.random.default_rng(0)
    X = rng.integers(0, 100, size=(40, 2))
    y = (X[:, 0] > 50).astype(int)
    path.write_text("a,b,y\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, y)))
    return path


# ---------------------------------------------------------------------- options: the bound in the message
@pytest.mark.parametrize("argv, match, bound", [
    (["fit", "{toy}", "--algo", "rf", "--n-trees", "10000000"], "--n-trees", "1..4096"),
    (["fit", "{toy}", "--algo", "de-pdt", "--population", "100000000"], "--population", "4..100000"),
    (["fit", "{toy}", "--algo", "gp", "--population", "100000000"], "--population", "4..100000"),
    (["fit", "{toy}", "--algo", "de-pdt", "--generations", "99999999999"], "--generations", "0..4294967295"),
    (["fit", "{toy}", "--algo", "cart", "--max-depth", "99999"], "--max-depth", "1..1024"),
    (["fit", "{toy}", "--algo", "cart", "--min-samples-leaf", str(2**40)], "--min-samples-leaf", "1..2147483647"),
    (["cv", "{toy}", "--algo", "cart", "--repeats", "100000000"], "--repeats", "1..10000"),
    (["cv", "{toy}", "--algo", "cart", "--folds", "100000000"], "--folds", "2..10000"),
    (["compare", "{toy}", "--algos", "cart", "--json", "{tmp}/c.json", "--repeats", "100000000"], "--repeats",
     "1..10000"),
    (["compare", "{toy}", "--algos", "cart", "--json", "{tmp}/c.json", "--seed", str(2**64)], "--seed",
     "0..18446744073709551615"),
    (["fit", "{toy}", "--algo", "rf", "--max-features", str(10**26)], "--max-features", "1..65535"),
    (["export", "{toy}", "--train", "--target", "qemu-m4", "--max-depth", "31", "-o", "{tmp}/ex"], "--max-depth",
     "1..30"),
    (["export", "{toy}", "--train", "--target", "qemu-m4", "--max-rows", str(2**32), "-o", "{tmp}/ex"], "--max-rows",
     "2..4294967295"),
    (["build", "{toy}", "--train", "--target", "qemu-m4", "--data", "{toy}", "--max-depth", "31"], "--max-depth",
     "1..30"),
    (["hil", "{toy}", "--target", "native", "--data", "{toy}", "--timeout", "1e308"], "--timeout", "86400"),
    (["hil", "{toy}", "--target", "native", "--data", "{toy}", "--timeout", "nan"], "--timeout", "86400"),
    (["hil", "{toy}", "--target", "native", "--data", "{toy}", "--timeout", "inf"], "--timeout", "86400"),
    (["hil", "{toy}", "--target", "native", "--data", "{toy}", "--timeout", "0"], "--timeout", "more than 0"),
    (["hil", "{toy}", "--target", "native", "--data", "{toy}", "--timeout", "-0.0"], "--timeout", "more than 0"),
    (["hil", "{toy}", "--target", "native", "--data", "{toy}", "--timeout", "86400.001"], "--timeout", "86400"),
])
def test_numeric_option_beyond_its_bound_is_one_line_naming_the_bound(toy, tmp_path, capsys, argv, match, bound):
    argv = [a.format(toy=toy, tmp=tmp_path) for a in argv]
    line = assert_user_error(capsys, argv + (["-o", str(tmp_path / "m.json")] if argv[0] == "fit" else []), match)
    assert bound in line
    assert not list(tmp_path.iterdir())


def test_the_cli_bounds_are_the_limits_module(toy, tmp_path, capsys):
    """A bound in the parser is the shared constant, not a copy: the largest allowed value parses."""
    from treegen.cli.main import build_parser

    args = build_parser().parse_args(["fit", str(toy), "--algo", "rf", "--n-trees", str(limits.MAX_TREES),
                                      "--max-depth", str(limits.MAX_DEPTH), "-o", "m.json"])
    assert (args.n_trees, args.max_depth) == (limits.MAX_TREES, limits.MAX_DEPTH)


def test_timeout_bounds_are_inclusive_at_the_limit_exclusive_at_zero(toy):
    """--timeout at its limit and just above 0 parses; 0 does not (issue #32: a timeout of 0 s was
    accepted); run_hil refuses 0 too."""
    from treegen.cli.main import build_parser
    from treegen.device import hil

    base = ["hil", str(toy), "--target", "native", "--data", str(toy), "--timeout"]
    assert build_parser().parse_args(base + [repr(limits.MAX_TIMEOUT)]).timeout == limits.MAX_TIMEOUT
    assert build_parser().parse_args(base + ["1e-3"]).timeout == 1e-3
    with pytest.raises(TreegenError, match="more than 0"):
        limits.check_timeout(0.0)
    with pytest.raises(TreegenError, match="timeout must be > 0"):
        hil.run_hil(object(), "native", port="socket://127.0.0.1:9", timeout=0)


def test_population_the_machine_cannot_hold_is_refused_before_allocating(toy):
    X = np.loadtxt(toy, delimiter=",", skiprows=1)
    with pytest.raises(TreegenError, match=r"DE-PDT: a population of 100000 trees of height 12 .* needs .* GiB of "
                                           r"memory, more than the .* available"):
        make_estimator("de-pdt", population=100_000, height=12, generations=1,
                       random_state=0).fit(np.tile(X[:, :2], (1, 40000)), X[:, 2])


def test_api_bounds(toy):
    X = np.loadtxt(toy, delimiter=",", skiprows=1)
    with pytest.raises(TreegenError, match="n_trees must be an integer 1..4096"):
        make_estimator("rf", n_trees=4097).fit(X[:, :2], X[:, 2])
    for algo in ("de-pdt", "gp", "de-cart"):
        with pytest.raises(TreegenError, match="population must be an integer 4..100000"):
            make_estimator(algo, population=100_001).fit(X[:, :2], X[:, 2])


# ---------------------------------------------------------------------- parallel counts: capped at the cores
def test_fit_jobs_beyond_the_cores_is_capped(toy, tmp_path):
    proc = run("fit", toy, "--algo", "rf", "--n-trees", "3", "--jobs", "1000000", "-q", "-o", tmp_path / "m.json")
    err = proc.stderr.decode()
    assert proc.returncode == 0, err[-2000:]
    assert f"jobs 1000000 capped at {len(os.sched_getaffinity(0))}" in err and "Traceback" not in err
    assert load(tmp_path / "m.json").trees.__len__() == 3


def test_compare_workers_beyond_the_cores_is_capped(toy, tmp_path):
    """Before the fix a local cluster of a million worker processes was being started (a hang)."""
    proc = run("compare", toy, "--algos", "cart", "--json", tmp_path / "c.json", "--workers", "1000000",
               "--folds", "2", timeout=240)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err[-2000:]
    assert f"--workers 1000000 capped at {len(os.sched_getaffinity(0))} (the cores available)" in err


# ---------------------------------------------------------------------- model files: one set of limits
def _forest(n_trees: int) -> Model:
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    one = make_estimator("cart", max_depth=1).fit(X, [0, 0, 1, 1]).model_
    return Model(trees=one.trees * n_trees, feature_names=one.feature_names, classes=one.classes,
                 scaling=one.scaling)


def test_writer_and_reader_share_the_tree_bound(tmp_path):
    """Before: an RF with 4097 trees was written but could not be read back (reader bound 4096)."""
    path = save(_forest(limits.MAX_TREES), tmp_path / "max.json")
    assert len(load(path).trees) == limits.MAX_TREES
    with pytest.raises(TreegenError, match=r"cannot write model file .*trees: has 4097 entries, expected 1..4096"):
        save(_forest(limits.MAX_TREES + 1), tmp_path / "over.json")
    assert not (tmp_path / "over.json").exists()


def test_model_reader_refuses_binary_and_oversized_input(tmp_path, monkeypatch):
    with pytest.raises(ModelFileError, match="/dev/zero is not a text file"):
        load("/dev/zero")
    path = save(_forest(3), tmp_path / "m.json")
    monkeypatch.setattr(limits, "MAX_MODEL_BYTES", 100)
    monkeypatch.setattr("treegen.core.model.MAX_MODEL_BYTES", 100)
    with pytest.raises(ModelFileError, match=r"m.json is larger than 100 B, the most treegen reads"):
        load(path)
    with pytest.raises(TreegenError, match="model is too large for a model file"):
        save(_forest(3), tmp_path / "n.json")


# ---------------------------------------------------------------------- data readers
def test_fit_dev_zero_is_one_line(tmp_path):
    """Before: MemoryError traceback (the reader read /dev/zero until memory ran out)."""
    proc = run("fit", "/dev/zero", "--algo", "cart", "-o", tmp_path / "m.json", timeout=30)
    one_error_line(proc, "/dev/zero is not a text file (a NUL byte at offset 0)")
    proc = subprocess.run([sys.executable, "-m", "treegen", "predict", "-", "-"], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=30)
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr


def test_data_bounded_in_bytes_rows_and_columns(tmp_path, monkeypatch):
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,y\n" + "1,2,0\n" * 50)
    monkeypatch.setattr("treegen.core.data.MAX_DATA_BYTES", 200)
    with pytest.raises(DataError, match=r"d.csv is larger than 200 B, the most treegen reads"):
        load_csv(csv)
    gz = tmp_path / "d.csv.gz"
    gz.write_bytes(gzip.compress(csv.read_bytes()))
    assert gz.stat().st_size < 200
    with pytest.raises(DataError, match=r"d.csv.gz decompresses to more than 200 B"):
        load_csv(gz)
    monkeypatch.setattr("treegen.core.data.MAX_DATA_BYTES", 1 << 20)
    monkeypatch.setattr("treegen.core.data.MAX_ROWS", 49)
    with pytest.raises(DataError, match="has 50 data rows, more than the 49 treegen reads"):
        load_csv(csv)
    monkeypatch.setattr("treegen.core.data.MAX_COLUMNS", 2)
    with pytest.raises(DataError, match=r"has 3 columns, more than the 2 treegen reads \(1 features and a label\)"):
        load_csv(csv)


def test_gzip_bomb_is_refused_without_inflating_it(tmp_path, monkeypatch):
    """A 1 MiB gzip file of 1 GiB + 1 of CSV text: refused while decompressing (the default bound)."""
    block = b"1,2\n" * (1 << 18)                                   # 1 MiB
    comp = gzip.compress(block, 9)
    bomb = tmp_path / "bomb.csv.gz"
    with open(bomb, "wb") as fh:
        fh.write(gzip.compress(b"a,b\n"))
        for _ in range(limits.MAX_DATA_BYTES // len(block)):
            fh.write(comp)
    assert bomb.stat().st_size < 8 << 20
    with pytest.raises(DataError, match=r"bomb.csv.gz decompresses to more than 1.0 GiB, the most treegen reads"):
        load_csv(bomb)


def test_concatenated_gzip_members_still_read(tmp_path):
    path = tmp_path / "two.csv.gz"
    path.write_bytes(gzip.compress(b"a,y\n1,0\n") + gzip.compress(b"2,1\n"))
    assert load_csv(path).n_rows == 2


# ---------------------------------------------------------------------- the pytest plugin's timeout
PLUGIN_TEST = '''
def test_device(treegen_options):
    assert treegen_options.timeout > 0
'''


@pytest.mark.parametrize("value", ["1e308", "nan", "-1", "0"])
def test_plugin_timeout_beyond_its_bound_fails_in_one_line(tmp_path, value):
    (tmp_path / "test_mine.py").write_text(PLUGIN_TEST, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(Path(limits.__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "treegen.hil.plugin",
                           "-q", "--treegen-timeout", value], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "INTERNALERROR" not in out and "OverflowError" not in out and "Traceback" not in out, out
    assert "--treegen-timeout must be more than 0 and at most 86400 seconds (one day)" in out, out


@pytest.mark.parametrize("argv, match", [
    (["compare", "{toy}", "--algos", "cart", "--json", "{tmp}/c.json", "--params", "/dev/zero"],
     "params file /dev/zero is not a text file (a NUL byte at offset 0)"),
    (["plot", "cv", "/dev/zero", "-o", "{tmp}/x.svg"], "/dev/zero: report is not a text file"),
])
def test_small_text_inputs_are_bounded(toy, tmp_path, capsys, argv, match):
    """Before: /dev/zero as a parameters file or a report was read until memory ran out."""
    assert_user_error(capsys, [a.format(toy=toy, tmp=tmp_path) for a in argv], match)
    assert not list(tmp_path.iterdir())


def test_small_text_bound(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    path.write_text('{"cart": {}}' + " " * 100)
    assert limits.read_text_file(path, "params file").strip() == '{"cart": {}}'
    with pytest.raises(TreegenError, match="params file is larger than 100 B"):
        limits.read_text_file(path, "params file", limit=100)
