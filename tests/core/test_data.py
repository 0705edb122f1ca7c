"""Dataset loading: CSV (plain or gzip), label column handling, shared datasets, clear errors."""

from __future__ import annotations

import gzip
import re

import numpy as np
import pytest
from conftest import load_shared

from treegen.core.data import class_list, encode, load_csv, load_for_model
from treegen.core.errors import DataError

PLAIN = "a,b,label\n1,2.5,0\n-3,4e2,1\n5,  6 ,1\n"


def write(tmp_path, name: str, text: str | bytes, gz: bool = False):
    path = tmp_path / name
    data = text.encode() if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


# ---------------------------------------------------------------------------------------------- good input
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_load_csv(tmp_path, gz):
    path = write(tmp_path, "d.csv.gz" if gz else "d.csv", PLAIN, gz)
    ds = load_csv(path)
    assert ds.X.dtype == np.float64
    assert ds.X.tolist() == [[1, 2.5], [-3, 400], [5, 6]]
    assert ds.labels.dtype == object
    assert ds.labels.tolist() == [0, 1, 1]
    assert all(type(v) is int for v in ds.labels)
    assert ds.feature_names == ["a", "b"]
    assert ds.label_name == "label"
    assert (ds.n_rows, ds.n_features) == (3, 2)
    assert ds.source == str(path)


def test_gzip_detected_by_content_not_name(tmp_path):
    gz = load_csv(write(tmp_path, "compressed.csv", PLAIN, gz=True))
    plain = load_csv(write(tmp_path, "plain.csv.gz", PLAIN))
    assert np.array_equal(gz.X, plain.X) and gz.labels.tolist() == plain.labels.tolist()


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_label_column_by_name(tmp_path, gz):
    path = write(tmp_path, "d.csv", "x,species,y\n1,setosa,2\n3,virginica,4\n5,setosa,6\n", gz)
    ds = load_csv(path, label="species")
    assert ds.feature_names == ["x", "y"]
    assert ds.label_name == "species"
    assert ds.X.tolist() == [[1, 2], [3, 4], [5, 6]]
    assert ds.labels.tolist() == ["setosa", "virginica", "setosa"]
    # with another label column, the string column 'species' becomes a (non-numeric) feature
    with pytest.raises(DataError, match="column 'species': non-numeric value 'setosa'"):
        load_csv(path, label="x")


def test_label_column_first(tmp_path):
    ds = load_csv(write(tmp_path, "d.csv", "cls,f1,f2\n2,0.5,1\n1,0.25,2\n"), label="cls")
    assert ds.feature_names == ["f1", "f2"]
    assert ds.labels.tolist() == [2, 1]
    assert ds.X.tolist() == [[0.5, 1], [0.25, 2]]


def test_string_labels_and_class_order(tmp_path):
    ds = load_csv(write(tmp_path, "d.csv", "a,b\n1,dog\n2,cat\n3,Dog\n4,cat\n5,10x\n"))
    assert ds.labels.tolist() == ["dog", "cat", "Dog", "cat", "10x"]
    assert all(type(v) is str for v in ds.labels)
    classes = class_list(ds.labels)
    assert classes == ["10x", "Dog", "cat", "dog"]  # lexicographic
    assert encode(ds.labels, classes).tolist() == [3, 2, 1, 2, 0]


def test_integer_labels_are_ordered_numerically(tmp_path):
    ds = load_csv(write(tmp_path, "d.csv", "a,b\n1,10\n2,9\n3,-1\n4,9\n"))
    classes = class_list(ds.labels)
    assert classes == [-1, 9, 10]
    assert encode(ds.labels, classes).tolist() == [2, 1, 0, 1]
    assert encode(ds.labels, classes).dtype == np.int64


def test_encode_unknown_label(tmp_path):
    ds = load_csv(write(tmp_path, "d.csv", "a,b\n1,1\n2,7\n"))
    with pytest.raises(DataError, match="label 7 is not one of the model's classes"):
        encode(ds.labels, [1, 2])


def test_blank_lines_whitespace_and_crlf_are_tolerated(tmp_path):
    ds = load_csv(write(tmp_path, "d.csv", "\r\n a , b , c \r\n\r\n1, 2 , x \r\n ,,\r\n3,4,y\r\n\r\n"))
    assert ds.feature_names == ["a", "b"] and ds.label_name == "c"
    assert ds.X.tolist() == [[1, 2], [3, 4]]
    assert ds.labels.tolist() == ["x", "y"]


def test_has_label_false(tmp_path):
    ds = load_csv(write(tmp_path, "d.csv", "a,b,c\n1,2,3\n4,5,6\n"), has_label=False)
    assert ds.X.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert ds.labels.shape == (0,)
    assert ds.label_name == ""
    assert ds.feature_names == ["a", "b", "c"]


# ---------------------------------------------------------------------------------------------- shared data
def _readme_table(datasets_dir) -> dict[str, tuple[int, int, int]]:
    text = (datasets_dir / "README.md").read_text()
    return {name: (int(r), int(a), int(c)) for name, r, a, c in re.findall(r"\b(\w+) (\d+)x(\d+)x(\d+)\b", text)}


def test_every_shared_dataset_loads_with_the_documented_shape(datasets_dir):
    files = sorted(datasets_dir.glob("*.csv.gz"))
    assert len(files) == 49, f"expected 49 shared datasets, found {len(files)}"
    table = _readme_table(datasets_dir)
    assert len(table) == 49
    assert {f.name.removesuffix(".csv.gz") for f in files} == set(table)
    problems = []
    for path in files:
        name = path.name.removesuffix(".csv.gz")
        ds = load_csv(path)
        rows, attrs, n_classes = table[name]
        classes = class_list(ds.labels)
        got = (ds.n_rows, ds.n_features, len(classes))
        if got != (rows, attrs, n_classes):
            problems.append(f"{name}: got {got}, README says {(rows, attrs, n_classes)}")
        if ds.feature_names != [f"a{i}" for i in range(attrs)] or ds.label_name != "class":
            problems.append(f"{name}: unexpected header")
        if classes != list(range(1, n_classes + 1)):
            problems.append(f"{name}: classes are not 1..{n_classes}")
        if not (ds.X.min() >= 0 and ds.X.max() <= 32767 and np.array_equal(ds.X, np.round(ds.X))):
            problems.append(f"{name}: attributes are not Q15 integers")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name, rows, attrs", [
    ("irs", 150, 4), ("vene", 300, 2), ("zoo", 101, 17), ("adult", 32561, 14), ("eb", 45781, 4),
    ("son", 208, 60), ("letter", 20000, 16),
])
def test_shared_dataset_row_counts(datasets_dir, name, rows, attrs):
    ds = load_csv(datasets_dir / f"{name}.csv.gz")
    assert (ds.n_rows, ds.n_features) == (rows, attrs)
    X, y = load_shared(name)
    assert np.array_equal(ds.X, X)
    assert ds.labels.tolist() == y.tolist()


def test_shared_dataset_label_by_name(datasets_dir):
    ds = load_csv(datasets_dir / "irs.csv.gz", label="class")
    assert ds.n_features == 4 and ds.label_name == "class"
    ds2 = load_csv(datasets_dir / "irs.csv.gz", label="a0")
    assert ds2.feature_names == ["a1", "a2", "a3", "class"]


# ---------------------------------------------------------------------------------------------- bad input
def _missing(tmp_path):
    return tmp_path / "nope.csv"


def _directory(tmp_path):
    (tmp_path / "adir").mkdir()
    return tmp_path / "adir"


BAD = {
    "missing file": (_missing, {}, r"data file not found: .*nope\.csv"),
    "directory": (_directory, {}, r"data path is a directory: .*adir"),
    "empty file": (lambda p: write(p, "e.csv", ""), {}, r"e\.csv is empty"),
    "only blank lines": (lambda p: write(p, "e.csv", "\n  \n\n"), {}, r"e\.csv is empty"),
    "empty gzip": (lambda p: write(p, "e.csv.gz", "", gz=True), {}, r"e\.csv\.gz is empty"),
    "header only": (lambda p: write(p, "h.csv", "a,b,label\n"), {}, r"h\.csv has a header but no data rows"),
    "single column": (lambda p: write(p, "s.csv", "label\n1\n"), {}, "needs at least one feature column"),
    "ragged row (short)": (lambda p: write(p, "r.csv", "a,b,c\n1,2,3\n4,5\n"), {},
                           r"r\.csv: line 3 has 2 fields, expected 3"),
    "ragged row (long)": (lambda p: write(p, "r.csv", "a,b,c\n1,2,3,4\n"), {},
                          r"r\.csv: line 2 has 4 fields, expected 3"),
    "non-numeric cell": (lambda p: write(p, "n.csv", "a,b,c\n1,2,3\n4,five,6\n"), {},
                         r"n\.csv: line 3, column 'b': non-numeric value 'five'"),
    "empty feature cell": (lambda p: write(p, "n.csv", "a,b,c\n1,,3\n"), {},
                           r"line 2, column 'b': empty \(a missing value\)"),
    "NaN": (lambda p: write(p, "nan.csv", "a,b,c\n1,2,3\nnan,5,6\n"), {},
            r"nan\.csv: line 3, column 'a': value 'nan' is NaN \(a missing value\)"),
    "inf": (lambda p: write(p, "inf.csv", "a,b,c\n1,-inf,3\n"), {},
            r"line 2, column 'b': value '-inf' is NaN or infinite"),
    "Infinity": (lambda p: write(p, "inf.csv", "a,b,c\n1,Infinity,3\n"), {}, "NaN or infinite"),
    "empty label": (lambda p: write(p, "l.csv", "a,b,c\n1,2,3\n4,5, \n"), {}, r"l\.csv: line 3: empty label"),
    "label column not found": (lambda p: write(p, "l.csv", "a,b,c\n1,2,3\n"), {"label": "klass"},
                               r"label column 'klass' not found in .*l\.csv \(columns: a, b, c\)"),
    "binary garbage": (lambda p: write(p, "g.csv", bytes(range(256)) * 8), {}, r"g\.csv is not a text file \(a NUL byte at offset 0\)"),
    "latin-1 text": (lambda p: write(p, "l1.csv", "a,b\n1,caf\xe9\n".encode("latin-1")), {},
                     "not a UTF-8 text CSV file"),
    "corrupt gzip": (lambda p: write(p, "c.csv.gz", b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4), {},
                     r"cannot read .*c\.csv\.gz"),
    "truncated gzip": (lambda p: write(p, "t.csv.gz", gzip.compress(PLAIN.encode() * 50)[:-20]), {},
                       r"cannot read .*t\.csv\.gz"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_raises_clear_data_error(tmp_path, case):
    make, kwargs, message = BAD[case]
    path = make(tmp_path)
    with pytest.raises(DataError) as info:
        load_csv(path, **kwargs)
    text = str(info.value)
    assert re.search(message, text), text
    assert "\n" not in text and "Traceback" not in text
    assert isinstance(info.value, ValueError)


# ---------------------------------------------------------------------------------------------- load_for_model
def test_load_for_model_with_label_column(tmp_path):
    path = write(tmp_path, "d.csv", "a,b,c,label\n1,2,3,x\n4,5,6,y\n")
    ds = load_for_model(path, n_features=3)
    assert ds.X.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert ds.labels.tolist() == ["x", "y"]
    assert ds.label_name == "label"


def test_load_for_model_without_label_column(tmp_path):
    path = write(tmp_path, "d.csv.gz", "a,b,c\n1,2,3\n4,5,6\n", gz=True)
    ds = load_for_model(path, n_features=3)
    assert ds.X.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert ds.labels.shape == (0,)
    assert ds.label_name == ""


def test_load_for_model_with_named_label(tmp_path):
    path = write(tmp_path, "d.csv", "y,a,b\n1,2,3\n0,5,6\n")
    ds = load_for_model(path, n_features=2, label="y")
    assert ds.X.tolist() == [[2, 3], [5, 6]]
    assert ds.labels.tolist() == [1, 0]
    # a named label column must exist
    with pytest.raises(DataError, match="label column 'z' not found"):
        load_for_model(path, n_features=2, label="z")


@pytest.mark.parametrize("header, row, label, expected", [
    ("a,b,c,d,e", "1,2,3,4,5", None, r"has 4 features, the model expects 3"),   # too many features
    ("a,b,c,d,e,f", "1,2,3,4,5,6", None, r"has 5 features, the model expects 3"),
    ("a,b,label", "1,2,x", "label", r"has 2 features, the model expects 3"),       # too few
    ("a,b", "1,2", None, r"has 1 features, the model expects 3"),
], ids=["one-too-many", "two-too-many", "too-few-with-label", "too-few"])
def test_load_for_model_wrong_width(tmp_path, header, row, label, expected):
    path = write(tmp_path, "d.csv", f"{header}\n{row}\n")
    with pytest.raises(DataError, match=expected) as info:
        load_for_model(path, n_features=3, label=label)
    assert "d.csv" in str(info.value)


@pytest.mark.parametrize("case", ["missing file", "directory", "empty file", "binary garbage", "corrupt gzip"])
def test_load_for_model_bad_files(tmp_path, case):
    make, _, message = BAD[case]
    path = make(tmp_path)
    with pytest.raises(DataError) as info:
        load_for_model(path, n_features=2)
    assert "\n" not in str(info.value)


def test_match_feature_names():
    from treegen.core.data import Dataset, match_feature_names

    X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    ds = Dataset(X, np.array([0, 1], dtype=object), ["b", "c", "a"], "y", "d.csv")
    assert match_feature_names(ds, ["b", "c", "a"]) is ds
    re_ordered = match_feature_names(ds, ["a", "b", "c"])
    assert re_ordered.feature_names == ["a", "b", "c"]
    np.testing.assert_array_equal(re_ordered.X, X[:, [2, 0, 1]])
    assert match_feature_names(ds, ["x0", "x1", "x2"]) is ds          # generated names: by position
    with pytest.raises(DataError, match=r"d.csv: the columns do not match .*missing z; unexpected c"):
        match_feature_names(ds, ["a", "b", "z"])
    dup = Dataset(X, np.array([0, 1], dtype=object), ["a", "a", "b"], "y", "d.csv")
    with pytest.raises(DataError, match="missing c"):
        match_feature_names(dup, ["a", "b", "c"])
