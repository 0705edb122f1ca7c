"""treegen.emit.plot and ``treegen plot``: each picture for an EFTI, a CART and an imported forest
(files written, text of SVGs checked), the cv/hil report pictures, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_user_error, load_shared, run_cli

from treegen import CARTClassifier, EFTIClassifier, save
from treegen.emit import plot


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from sklearn.ensemble import RandomForestClassifier

    from treegen.importers.sklearn import from_sklearn

    d = tmp_path_factory.mktemp("plot")
    X, y = load_shared("irs")
    csv = d / "irs.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt="%d", header="a,b,c,d,class", comments="")
    efti = EFTIClassifier(max_iter=3000, random_state=2).fit(X, y).model_
    cart = CARTClassifier(max_depth=3).fit(X, y).model_
    Xf = X / 1000.0                                             # float data for the imported forest
    rf = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(Xf, y)
    forest = from_sklearn(rf, X=Xf)
    csv_f = d / "irs_float.csv"
    np.savetxt(csv_f, np.column_stack([Xf, y]), delimiter=",", header="f0,f1,f2,f3,class", comments="")
    files = {}
    for name, m in (("efti", efti), ("cart", cart), ("forest", forest)):
        files[name] = d / f"{name}.json"
        save(m, files[name])
    return d, files, {"efti": csv, "cart": csv, "forest": csv_f}


def svg_text(path) -> str:
    text = path.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    return text


@pytest.mark.parametrize("name", ["efti", "cart", "forest"])
def test_model_pictures(models, name, tmp_path, capsys):
    d, files, data = models
    model_file, csv = files[name], data[name]
    for kind, extra in (("tree", []), ("partition", [csv]), ("confusion", [csv])):
        out = tmp_path / f"{kind}.svg"
        code, stdout, err = run_cli(capsys, ["plot", kind, model_file, *extra, "-o", out])
        assert code == 0, err
        assert f"picture         {out}" in stdout
        text = svg_text(out)
        if kind == "tree":
            assert "class " in text and "yes" in text and "raw input units" in text
            if name == "forest":
                assert "tree 2" in text                          # all three trees drawn
        elif kind == "partition":
            assert "regions of the model" in text and ">class<" in text
        else:
            assert "accuracy" in text and "predicted class" in text
    png = tmp_path / "tree.png"
    assert run_cli(capsys, ["plot", "tree", model_file, "-o", png])[0] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_oblique_box_lists_the_largest_raw_weights(models):
    from treegen.core.model import load

    model = load(models[1]["efti"])
    tree = model.tree
    oblique = [n for n in range(tree.n_nodes) if tree.left[n] != -1 and np.count_nonzero(tree.weights[n]) > 3]
    for node in oblique:
        label = plot.node_label(model, tree, node)
        assert f"+ {np.count_nonzero(tree.weights[node]) - 3} more <= " in label


def test_cv_and_hil_pictures(models, tmp_path, capsys):
    d, files, data = models
    reports = []
    for algo in ("cart", "efti"):
        js = tmp_path / f"cv-{algo}.json"
        extra = ["--max-iter", "500"] if algo == "efti" else []
        code, _, err = run_cli(capsys, ["cv", data["cart"], "--algo", algo, *extra, "--folds", "3", "--json", js, "-q"])
        assert code == 0, err
        reports.append(js)
    out = tmp_path / "cv.svg"
    assert run_cli(capsys, ["plot", "cv", *reports, "-o", out])[0] == 0
    text = svg_text(out)
    assert "cart" in text and "efti" in text and "leaves" in text
    hil = []
    for target, insn in (("qemu-m3", 230.5), ("qemu-m4", 211.6)):
        js = tmp_path / f"hil-{target}.json"
        js.write_text(json.dumps({"command": "hil", "ok": True, "target": target, "variant": "q15-table-dsp",
                                  "flash_bytes": 2872, "rows_per_s": 596.0, "insn_per_inference": insn,
                                  "counter_unit": "instructions"}))
        hil.append(js)
    out = tmp_path / "hil.svg"
    assert run_cli(capsys, ["plot", "hil", *hil, "-o", out])[0] == 0
    text = svg_text(out)
    assert "qemu-m3" in text and "qemu-m4" in text and "211.6" in text and "every check passed" in text


def test_plot_errors(models, tmp_path, capsys):
    d, files, data = models
    m = files["efti"]
    assert_user_error(capsys, ["plot", "tree", m, "-o", tmp_path / "x.gif"], "not supported")
    assert_user_error(capsys, ["plot", "partition", m, "-o", tmp_path / "x.svg"], "takes MODEL DATA")
    assert_user_error(capsys, ["plot", "partition", m, data["efti"], "--features", "x0,zz", "-o", tmp_path / "x.svg"],
                      "unknown feature 'zz'")
    assert_user_error(capsys, ["plot", "partition", m, data["efti"], "--features", "a", "-o", tmp_path / "x.svg"],
                      "two names")
    assert_user_error(capsys, ["plot", "tree", m, "--features", "a,b", "-o", tmp_path / "x.svg"],
                      "only applies to plot partition")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert_user_error(capsys, ["plot", "cv", bad, "-o", tmp_path / "x.svg"], "not a JSON report")
    bad.write_text(json.dumps({"accuracy": {"mean": 1}}))
    assert_user_error(capsys, ["plot", "cv", bad, "-o", tmp_path / "x.svg"], "missing leaves")
    assert_user_error(capsys, ["plot", "hil", tmp_path / "none.json", "-o", tmp_path / "x.svg"], "not found")
    assert_user_error(capsys, ["plot", "tree", m, "-o", tmp_path / "no" / "x.svg"], "cannot write picture")
