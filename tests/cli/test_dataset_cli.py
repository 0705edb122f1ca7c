"""``treegen dataset`` (issue #34 point 8): the quickstart's datasets ship with the package, so it runs
from a plain ``pip install`` with no download. Each shipped file is what SAMPLES says it is; the
command writes gzip or plain CSV by the file name; misuse is one line, exit 2."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from conftest import assert_user_error, run_cli
from treegen.core.data import load_csv
from treegen.core.samples import SAMPLES, load_sample, sample_path


@pytest.mark.parametrize("name", list(SAMPLES))
def test_shipped_datasets_are_what_the_list_says(name):
    s, ds = SAMPLES[name], load_sample(name)
    assert (ds.n_rows, ds.n_features, len(set(ds.labels.tolist()))) == (s.rows, s.features, s.classes)
    assert ds.X.min() >= 0 and ds.X.max() <= 32767


def test_list_and_write(tmp_path, capsys):
    code, out, err = run_cli(capsys, ["dataset"])
    assert code == 0, err
    for s in SAMPLES.values():
        assert s.name in out and s.description in out
    code, out, err = run_cli(capsys, ["dataset", "veh", "-o", tmp_path / "veh.csv.gz"])
    assert code == 0, err
    assert (tmp_path / "veh.csv.gz").read_bytes() == sample_path("veh").read_bytes()
    code, out, err = run_cli(capsys, ["dataset", "irs", "-o", tmp_path / "irs.csv"])
    assert code == 0, err
    assert (tmp_path / "irs.csv").read_bytes() == gzip.decompress(sample_path("irs").read_bytes())
    assert np.array_equal(load_csv(tmp_path / "irs.csv").X, load_sample("irs").X)


def test_misuse_is_one_line(tmp_path, capsys):
    assert_user_error(capsys, ["dataset", "nope", "-o", tmp_path / "x.csv"], "no shipped dataset 'nope'")
    assert_user_error(capsys, ["dataset", "veh"], "-o FILE says where to write it")
    assert_user_error(capsys, ["dataset", "-o", tmp_path / "x.csv"], "-o needs a dataset NAME")
    assert_user_error(capsys, ["dataset", "veh", "-o", tmp_path / "no" / "x.csv"], "does not exist")
