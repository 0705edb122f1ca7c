"""treegen.emit.export (report, validation) and the ``treegen export`` / ``treegen targets`` commands."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error, run_cli
from export_models import make_model, random_tree, require, small_axis_tree, small_models

from treegen.core import codegen
from treegen.core.errors import TreegenError
from treegen.core.model import save
from treegen.core.targets import get as get_target
from treegen.core.tree import LEAF, Tree
from treegen.emit import size as size_mod
from treegen.emit.export import STRICT_CFLAGS, export_model, resolve_variant

run = run_cli


@pytest.fixture
def model_file(tmp_path) -> Path:
    """An axis tree over 3 features with integer labels 1..3, saved as veh-like 'iris.json'."""
    model = make_model([small_axis_tree()], 3, 3, classes=[1, 2, 3], names=["a", "b", "c"])
    return save(model, tmp_path / "iris.json")


@pytest.fixture
def data_file(tmp_path) -> Path:
    rng = np.random.default_rng(3)
    X = rng.integers(0, 32768, (200, 3))
    model = make_model([small_axis_tree()], 3, 3, classes=[1, 2, 3])
    y = np.asarray(model.predict(X.astype(float)))
    y[:20] = np.where(y[:20] == 1, 2, 1)  # 20 wrong labels: accuracy 90 %
    lines = ["a,b,c,label"] + [f"{r[0]},{r[1]},{r[2]},{c}" for r, c in zip(X, y)]
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _big_model(n_internal: int, n_features: int = 60, seed: int = 5):
    rng = np.random.default_rng(seed)
    return make_model([random_tree(rng, n_features, 3, n_internal, "efti")], n_features, 3)


# ---------------------------------------------------------------------- CLI: success
def test_cli_export_report_and_json(tmp_path, model_file, data_file, capsys):
    out, js = tmp_path / "out", tmp_path / "report.json"
    code, stdout, err = run(capsys, ["export", model_file, "--target", "cortex-m4", "--data", data_file,
                                     "-o", out, "--json", js])
    assert code == 0, err
    assert err == ""
    # the library only: no main()
    assert sorted(p.name for p in out.iterdir()) == [".treegen-manifest.json", "iris.c", "iris.h"]
    for text in ("target          cortex-m4", "layout table, dtype q15, variant dsp", "field types",
                 "agreement       100.00 % fixed-point vs float  (200 rows)", "accuracy        float 90.00 %",
                 "flash / RAM"):
        assert text in stdout, stdout
    rep = json.loads(js.read_text())
    assert rep["command"] == "export" and rep["name"] == "iris" and rep["variant"] == "dsp"
    assert rep["files"] == [str(out / "iris.h"), str(out / "iris.c")]
    assert rep["acc_bits"] == 16 and rep["exact"] is True and rep["unresolved_rows"] == []
    assert rep["field_types"] == {"child_ref": "int8_t", "feature_index": "int8_t"}
    assert rep["agreement"] == {"rows": 200, "fixed_vs_float": 1.0, "accuracy_float": 0.9,
                                "accuracy_fixed": 0.9}
    assert isinstance(rep["flash_bytes"], int) and rep["flash_bytes"] > 0  # arm-none-eabi-size is installed
    assert isinstance(rep["ram_bytes"], int)
    assert any(k.startswith(".rodata.tg_iris_t0_") for k in rep["sections"])
    assert rep["estimated_bytes"] > 0
    # --example: example/main.c uses the first data rows as its examples and agrees with Python on them
    code, stdout, err = run(capsys, ["export", model_file, "--target", "cortex-m4", "--data", data_file,
                                     "-o", out, "--example"])
    assert code == 0, err
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == \
        [".treegen-manifest.json", "example/main.c", "iris.c", "iris.h"]
    assert f"example         cc -std=c99 -O2 -I {out} {out / 'iris.c'} {out / 'example/main.c'}" in stdout
    exe = tmp_path / "main"
    subprocess.run([require("gcc"), *STRICT_CFLAGS, "-I", str(out), str(out / "iris.c"), str(out / "example/main.c"),
                    "-o", str(exe)], check=True)
    proc = subprocess.run([str(exe)], capture_output=True, text=True)
    assert proc.returncode == 0 and "0 of 4 rows differ" in proc.stdout


def test_cli_export_options(tmp_path, model_file, capsys):
    out = tmp_path / "o"
    code, stdout, err = run(capsys, ["export", model_file, "--target", "cortex-m0plus", "--layout", "unrolled",
                                     "--dtype", "f32", "--name", "My Model-1", "-o", out])
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [".treegen-manifest.json", "my_model_1.c", "my_model_1.h"]
    header = (out / "my_model_1.h").read_text()
    assert "int tg_my_model_1_predict_f32(const float *x_raw);" in header
    assert "predict_q15" not in header
    assert "agreement" not in stdout  # no --data
    code, stdout, err = run(capsys, ["export", model_file, "--target", "cortex-m3", "-o", out])
    assert code == 0 and "variant scalar" in stdout  # auto: no DSP extension on M3


def test_cli_targets_json(tmp_path, capsys):
    js = tmp_path / "targets.json"
    code, out, err = run(capsys, ["targets", "--json", js])
    assert code == 0 and err == ""
    targets = {t["name"]: t for t in json.loads(js.read_text())["targets"]}
    assert set(targets) == {line.split()[0] for line in out.splitlines()[1:]}
    assert targets["qemu-m4"]["emulator"]["machine"] == "mps2-an386" and targets["qemu-m4"]["dsp"] is True
    assert targets["teensy41"]["ram_kb"] == 512 and "512 KiB RAM1" in targets["teensy41"]["description"]


def test_cli_targets(capsys):
    code, out, err = run(capsys, ["targets"])
    assert code == 0 and err == ""
    lines = out.splitlines()
    header = lines[0].split()
    assert {"name", "core", "FPU", "DSP", "flash", "RAM"} <= set(header)
    col = {h: header.index(h) for h in header}
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert {"cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "native"} <= set(rows)

    def cell(target, column):  # flash and RAM are "<n> KiB": two words each, before the description
        words = rows[target]
        shift = {"RAM": 1}.get(column, 0)
        return words[col[column] + shift]

    assert [cell("cortex-m4", c) for c in ("core", "FPU", "DSP", "flash", "RAM")] == \
        ["cortex-m4", "yes", "yes", "512", "128"]
    assert [cell("cortex-m0plus", c) for c in ("core", "FPU", "DSP", "flash", "RAM")] == \
        ["cortex-m0plus", "no", "no", "32", "8"]


# ---------------------------------------------------------------------- CLI: bad input
@pytest.mark.parametrize("args, match", [
    (["--target", "pdp11"], "unknown target 'pdp11'"),
    (["--target", "cortex-m4", "--layout", "diagonal"], "invalid choice: 'diagonal'"),
    (["--target", "cortex-m4", "--dtype", "q7"], "invalid choice: 'q7'"),
    (["--target", "cortex-m4", "--variant", "neon"], "invalid choice: 'neon'"),
    (["--target", "cortex-m3", "--variant", "dsp"], "needs the ARMv7E-M DSP extension"),
    (["--target", "cortex-m0plus", "--variant", "dsp"], "target 'cortex-m0plus'"),
    (["--target", "cortex-m4", "--dtype", "f32", "--variant", "dsp"], "q15 dtype only"),
    (["--target", "cortex-m4", "--variant", "mve"], "variant 'mve' needs the M-profile Vector Extension"),
    (["--target", "cortex-m33", "--variant", "mve"], "target 'cortex-m33'"),
    (["--target", "cortex-m55", "--dtype", "f32", "--variant", "mve"], "q15 dtype only"),
    (["--target", "cortex-m4", "--label", "x"], "--label needs --data"),
    (["--layout", "table"], "--target"),
])
def test_cli_export_bad_options(tmp_path, model_file, capsys, args, match):
    assert_user_error(capsys, ["export", model_file, *args, "-o", tmp_path / "o"], match)
    assert not (tmp_path / "o").exists()


def test_cli_export_bad_paths_and_data(tmp_path, model_file, data_file, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert_user_error(capsys, ["export", model_file, "--target", "native", "-o", afile], "is a file")
    assert_user_error(capsys, ["export", tmp_path / "missing.json", "--target", "native", "-o", tmp_path / "o"],
                      "model file not found")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert_user_error(capsys, ["export", model_file, "--target", "native", "--data", bad, "-o", tmp_path / "o"],
                      "the model expects 3")
    assert_user_error(capsys, ["export", model_file, "--target", "native", "--data", data_file, "--label", "zz",
                               "-o", tmp_path / "o"], "label column 'zz' not found")


def test_cli_export_too_big_for_flash(tmp_path, capsys):
    path = save(_big_model(300), tmp_path / "big.json")  # 300 nodes x 60 int16 weights = 36 KB > 32 KB
    line = assert_user_error(capsys, ["export", path, "--target", "cortex-m0plus", "-o", tmp_path / "o"],
                             "bytes of flash, more than target 'cortex-m0plus' has (32768 bytes)")
    assert not (tmp_path / "o").exists()
    code, out, err = run(capsys, ["export", path, "--target", "cortex-m4", "-o", tmp_path / "o"])
    assert code == 0, err + line


def test_cli_export_field_width_overflow(tmp_path, capsys, monkeypatch):
    """The widths are checked, never capped: with only int8_t available a 200-node tree is an error."""
    path = save(_big_model(200, n_features=4), tmp_path / "m.json")
    monkeypatch.setattr(codegen, "INT_TYPES", codegen.INT_TYPES[:1])
    assert_user_error(capsys, ["export", path, "--target", "native", "-o", tmp_path / "o"],
                      "child reference (200 internal nodes, 3 classes) needs values -3..199")


# ---------------------------------------------------------------------- library
def test_int_type_choice_and_limit():
    assert codegen.int_type(-3, 127, "x")["c"] == "int8_t"
    assert codegen.int_type(-129, 5, "x")["c"] == "int16_t"
    assert codegen.int_type(0, 40000, "x")["c"] == "int32_t"
    with pytest.raises(TreegenError, match="feature index needs values 0..4294967296"):
        codegen.int_type(0, 1 << 32, "feature index")


def test_field_widths_grow_with_the_model(tmp_path):
    rep = export_model(_big_model(200, n_features=4), tmp_path, target="native", measure=False)
    assert rep.field_types == {"child_ref": "int16_t", "feature_index": "int8_t"}
    rep = export_model(_big_model(3, n_features=200), tmp_path, target="native", measure=False)
    assert rep.field_types == {"child_ref": "int8_t", "feature_index": "int16_t"}


@pytest.mark.parametrize("kwargs, match", [
    ({"target": "nope"}, "unknown target"),
    ({"target": "native", "layout": "x"}, "unknown layout 'x'"),
    ({"target": "native", "dtype": "q31"}, "unknown dtype 'q31'"),
    ({"target": "native", "variant": "simd"}, "unknown variant 'simd'"),
    ({"target": "native", "variant": "dsp"}, "target 'native'"),
])
def test_export_model_rejects(tmp_path, kwargs, match):
    with pytest.raises(TreegenError, match=match):
        export_model(small_models()["axis"], tmp_path / "o", **kwargs)
    assert not (tmp_path / "o").exists()


def test_variant_resolution():
    assert resolve_variant("auto", get_target("cortex-m4"), "q15") == "dsp"
    assert resolve_variant("auto", get_target("cortex-m7"), "q15") == "dsp"
    assert resolve_variant("auto", get_target("cortex-m3"), "q15") == "scalar"
    assert resolve_variant("auto", get_target("native"), "q15") == "scalar"
    assert resolve_variant("auto", get_target("cortex-m4"), "f32") == "scalar"
    assert resolve_variant("scalar", get_target("cortex-m4"), "q15") == "scalar"
    assert resolve_variant("auto", get_target("cortex-m55"), "q15") == "mve"      # Helium first
    assert resolve_variant("auto", get_target("qemu-m55"), "q15") == "mve"
    assert resolve_variant("auto", get_target("cortex-m33"), "q15") == "dsp"
    assert resolve_variant("auto", get_target("qemu-m33"), "q15") == "dsp"
    assert resolve_variant("dsp", get_target("cortex-m55"), "q15") == "dsp"
    assert resolve_variant("auto", get_target("cortex-m55"), "f32") == "scalar"


def test_names(tmp_path):
    model = small_models()["axis"]  # metadata dataset demo.csv
    assert export_model(model, tmp_path, target="native", measure=False).name == "demo"
    assert export_model(model, tmp_path, target="native", name="3-axis.model", measure=False).name == "m3_axis_model"
    assert export_model(model, tmp_path, target="native", name="***", measure=False).name == "model"


def test_unresolved_rows_and_inexact_report(tmp_path):
    """A weight far below the node's largest one rounds to 0: rows that differ only in that feature
    cannot keep their float sides; the report names them and the agreement shows it."""
    W = np.zeros((3, 2))
    W[0] = [1.0, 1e-9]
    tree = Tree(W, [0.5 + 0.5e-9, 0, 0], [1, LEAF, LEAF], [2, LEAF, LEAF], [0, 0, 1], np.zeros((3, 2), np.int64))
    model = make_model([tree], 2, 2)
    X = np.array([[16384, 0], [16384, 32767], [100, 100], [30000, 5]], dtype=float)
    rep = export_model(model, tmp_path, target="cortex-m4", data=(X, np.array([0, 1, 0, 1], dtype=object)))
    assert rep.exact is False
    assert len(rep.unresolved_rows) == 1 and rep.unresolved_rows[0] in (0, 1)
    assert rep.agreement["fixed_vs_float"] == 0.75
    assert rep.agreement["accuracy_float"] == 1.0 and rep.agreement["accuracy_fixed"] == 0.75
    assert any("cannot keep their float side" in n for n in rep.notes)


def test_size_not_measured_without_a_compiler(tmp_path, monkeypatch):
    monkeypatch.setattr(size_mod.shutil, "which", lambda name: None)
    rep = export_model(small_models()["oblique"], tmp_path, target="cortex-m4")
    assert rep.flash_bytes is None and rep.ram_bytes is None
    assert rep.size_note == "not measured: arm-none-eabi-gcc not found"


def test_f32_report_and_sizes(tmp_path):
    rep = export_model(small_models()["oblique"], tmp_path, target="cortex-m4", dtype="f32")
    assert rep.dtype == "f32" and rep.acc_bits is None
    assert rep.exact is False and rep.trees[0]["exact"] is False  # oblique: scaling folded, measured
    assert rep.flash_bytes and ".text.tg_demo_predict_f32" in rep.sections
    assert not any("offset" in k or "scale" in k for k in rep.sections)  # no scaling on the device
    assert any(n.startswith("f32: oblique") for n in rep.notes)
    rep = export_model(small_models()["axis"], tmp_path / "a", target="cortex-m4", dtype="f32")
    assert rep.exact is True and rep.trees[0]["exact"] is True  # raw-unit thresholds: exact
    assert any(n.startswith("f32: axis") for n in rep.notes)


def test_f32_report_agreement(tmp_path):
    """With data, the f32 report gives its measured agreement with the float model (and accuracy)."""
    model = make_model([small_axis_tree()], 3, 3, classes=[1, 2, 3])
    X = np.random.default_rng(4).integers(0, 32768, (300, 3)).astype(float)
    y = np.asarray(model.predict(X))
    rep = export_model(model, tmp_path, target="cortex-m4", dtype="f32", data=(X, y), measure=False)
    assert rep.agreement == {"rows": 300, "f32_vs_float": 1.0, "accuracy_float": 1.0,
                             "accuracy_f32": 1.0}
    assert any("100.00 % agreement with the float model (300 rows)" in n for n in rep.notes)


def test_deep_tree_no_recursion(tmp_path):
    """A 1500-node chain: generated without recursion (no recursion limit), int16_t references, and
    the unrolled and table code compile and agree on the host."""
    n = 1500
    size = 2 * n + 1
    W = np.zeros((size, 2))
    thr = np.zeros(size)
    left, right = [LEAF] * size, [LEAF] * size
    for k in range(n):
        node = 2 * k
        left[node], right[node] = node + 2, node + 1
        W[node, k % 2] = 1.0
        thr[node] = 1.0 - (k + 1) / (n + 2)
    tree = Tree(W, thr, left, right, np.arange(size) % 3, np.zeros((size, 3), np.int64)).validate()
    model = make_model([tree], 2, 3)
    for layout in ("table", "unrolled"):
        rep = export_model(model, tmp_path / layout, target="native", layout=layout, measure=False, example=True)
        assert rep.field_types["child_ref"] == "int16_t"
        assert rep.trees[0]["depth"] == n
        exe = tmp_path / layout / "main"
        subprocess.run([require("gcc"), *STRICT_CFLAGS, "-O1", "-I", str(tmp_path / layout),
                        str(tmp_path / layout / "demo.c"), str(tmp_path / layout / "example" / "main.c"),
                        "-o", str(exe)], check=True)
        proc = subprocess.run([str(exe)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout
