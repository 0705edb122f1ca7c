"""Inputs read once (pipes, FIFOs, /dev/stdin, process substitution, '-', BOM) and outputs that never
clobber an input or a user's file (issue 10, items 1, 3 and 9)."""

from __future__ import annotations

import gzip
import os
import subprocess
import threading

import pytest

from conftest import run_cli
from rel_util import DATASETS, env, one_error_line, run

IRIS = DATASETS / "irs.csv.gz"


@pytest.fixture(scope="module")
def iris(tmp_path_factory):
    d = tmp_path_factory.mktemp("iris")
    text = gzip.decompress(IRIS.read_bytes())
    (d / "irs.csv").write_bytes(text)
    run("fit", d / "irs.csv", "--algo", "cart", "-o", d / "m.json").check_returncode()
    return d, text


def _rows(proc) -> str:
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return out


@pytest.mark.parametrize("arg", ["-", "/dev/stdin"])
@pytest.mark.parametrize("gz", [False, True], ids=["csv", "gzip"])
def test_fit_from_a_pipe_reads_every_row(iris, tmp_path, arg, gz):
    d, text = iris
    data = gzip.compress(text) if gz else text
    out = _rows(run("fit", arg, "--algo", "cart", "-o", tmp_path / "m.json", input=data))
    assert "(150 rows, 4 features, 3 classes)" in out


def test_eval_data_from_dev_stdin_and_model_from_stdin(iris):
    d, text = iris
    assert "(150 rows)" in _rows(run("eval", d / "m.json", "/dev/stdin", input=text))
    assert "(150 rows)" in _rows(run("eval", "-", d / "irs.csv", input=(d / "m.json").read_bytes()))
    assert "(150 rows)" in _rows(run("eval", "/dev/stdin", d / "irs.csv", input=(d / "m.json").read_bytes()))


def test_process_substitution(iris, tmp_path):
    d, _ = iris
    cmd = f'"$PY" -m treegen eval "{d / "m.json"}" <(zcat "{IRIS}")'
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, timeout=60,
                          env=env(PY=__import__("sys").executable))
    assert "(150 rows)" in _rows(proc)


def test_fifo(iris, tmp_path):
    d, text = iris
    fifo = tmp_path / "data.fifo"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "wb") as fh:
            fh.write(gzip.compress(text))
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    proc = run("predict", d / "m.json", fifo, timeout=30)
    t.join(5)
    assert _rows(proc).count("\n") == 151


def test_utf8_bom_is_not_part_of_the_first_column(tmp_path):
    data = tmp_path / "bom.csv"
    data.write_bytes(b"\xef\xbb\xbfa0,a1,y\n1,2,0\n2,1,1\n3,3,0\n4,0,1\n")
    proc = run("fit", data, "--algo", "cart", "--label", "a0", "-o", tmp_path / "m.json")
    assert proc.returncode == 0, proc.stderr.decode()


# ---------------------------------------------------------------------- outputs
def test_output_equal_to_an_input_is_refused(iris, tmp_path, capsys):
    d, text = iris
    data = tmp_path / "d.csv"
    data.write_bytes(text)
    model = tmp_path / "m.json"
    model.write_bytes((d / "m.json").read_bytes())
    before = {p: p.read_bytes() for p in (data, model)}
    cases = [["fit", data, "--algo", "cart", "-o", data],
             ["fit", data, "--algo", "cart", "-o", tmp_path / "new.json", "--json", data],
             ["predict", model, data, "-o", data],
             ["predict", model, data, "-o", model],
             ["predict", model, data, "-o", tmp_path / "." / "d.csv"],
             ["eval", model, data, "--json", model],
             ["cv", data, "--algo", "cart", "--json", data]]
    for argv in cases:
        code, out, err = run_cli(capsys, argv)
        assert code == 2 and err.startswith("treegen: error: ") and "also an input" in err, (argv, code, err)
    assert {p: p.read_bytes() for p in (data, model)} == before
    os.link(data, tmp_path / "hard.csv")
    code, _, err = run_cli(capsys, ["predict", model, data, "-o", tmp_path / "hard.csv"])
    assert code == 2 and "also an input" in err
    assert {p: p.read_bytes() for p in (data, model)} == before


def test_outputs_are_written_atomically(iris, tmp_path, capsys, monkeypatch):
    """A write that fails half-way leaves the previous file intact and no temporary file behind."""
    d, _ = iris
    out = tmp_path / "pred.csv"
    out.write_text("previous\n")
    import treegen.core.output as output

    real = os.fsync

    def failing_fsync(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(output.os, "fsync", failing_fsync)
    code, _, err = run_cli(capsys, ["predict", d / "m.json", d / "irs.csv", "-o", out])
    monkeypatch.setattr(output.os, "fsync", real)
    assert code == 2 and "No space left" in err
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pred.csv"]


def test_export_keeps_a_users_file(iris, tmp_path, capsys):
    d, _ = iris
    out = tmp_path / "c"
    out.mkdir()
    (out / "main.c").write_text("int main(void) { return 42; } /* mine */\n")
    code, _, err = run_cli(capsys, ["export", d / "m.json", "--target", "native", "-o", out])
    assert code == 2 and "not generated by treegen" in err and "main.c" in err, err
    assert (out / "main.c").read_text().endswith("/* mine */\n")
    assert sorted(p.name for p in out.iterdir()) == ["main.c"]      # nothing half-written
    # treegen's own files are replaced freely; --force replaces the user's
    code, _, err = run_cli(capsys, ["export", d / "m.json", "--target", "native", "-o", out, "--force"])
    assert code == 0, err
    assert "generated by treegen" in (out / "main.c").read_text()
    code, _, err = run_cli(capsys, ["export", d / "m.json", "--target", "native", "-o", out])
    assert code == 0, err
