"""Pictures a person reads at a glance (issue #34 point 6), each check written against what was wrong:
the tune front had unreadable flash labels on a linear axis that crushed small models, named only the
chosen point and could not be redrawn from tune.json; the hil picture overlapped target names, printed
flash as 2.762e+04 and did not say which model a bar was; the tree picture's text was tiny on a wide
canvas."""

from __future__ import annotations

import json
import re

import pytest
from conftest import assert_user_error, load_shared, run_cli

from treegen import CARTClassifier, save
from treegen.emit import plot
from treegen.emit.plot_tune import _axis

pytest.importorskip("matplotlib")


def _tune_result(n=12, failed=True):
    pts = [{"name": f"cart(max_depth={k + 1})", "algorithm": "cart", "params": {}, "accuracy": 0.6 + 0.01 * k,
            "n_folds": 5, "layout": "table", "variant": "scalar", "flash_bytes": int(200 * 2 ** (k / 2)),
            "ram_bytes": 0, "instructions": 10.0 * 1.6 ** k, "latency_us": 0.4 * 1.6 ** k, "fits": k < 5}
           for k in range(n)]
    return {"target": "qemu-m4", "clock_hz": 25_000_000, "seed": 1, "budget": {"max_flash": 1024, "max_ram": None,
            "max_latency_us": 2.0, "max_instructions": None}, "points": pts, "front": [0, 4, 8, 11],
            "chosen": dict(pts[4], index=4), "failures": ([{"name": "de-pdt(height=1)", "stage": "fit", "reason": "refused: height must"
                                                          " be an integer in 2..12"}] if failed else [])}


def _svg(path) -> str:
    return path.read_text(encoding="utf-8")


def test_tune_picture_names_every_point_and_redraws_from_json(tmp_path, capsys):
    js = tmp_path / "tune.json"
    js.write_text(json.dumps(_tune_result()))
    out = tmp_path / "front.svg"
    code, stdout, err = run_cli(capsys, ["plot", "tune", js, "-o", out])
    assert code == 0, err
    text = _svg(out)
    for k in range(12):                         # every measured point is named in the key
        assert f"cart(max_depth={k + 1})" in text
    assert "failed (fit): de-pdt(height=1): refused" in text   # and every failed candidate, with its stage
    assert "2.762e+04" not in text and "e+0" not in text
    assert_user_error(capsys, ["plot", "tune", js, js, "-o", tmp_path / "x.svg"], "takes TUNE.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"target": "qemu-m4"}))
    assert_user_error(capsys, ["plot", "tune", bad, "-o", tmp_path / "x.svg"], "not a 'treegen tune --json' result")


def test_tune_axes_turn_logarithmic_where_sizes_span_decades():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2)
    _axis(a, [200, 400, 9000], "flash_bytes", 1024)
    _axis(b, [700, 740, 772], "flash_bytes", 1024)
    assert a.get_xscale() == "log" and b.get_xscale() == "linear"
    fig.canvas.draw()
    labels = [t.get_text() for t in a.get_xticklabels() if t.get_text()]
    assert labels and all(re.fullmatch(r"[\d.]+ (B|KiB)", t) for t in labels), labels
    plt.close(fig)


def test_hil_picture_names_each_bar_with_its_model_and_target(tmp_path, capsys):
    reports = []
    for k, (target, flash, unit) in enumerate((("qemu-m4", 27620, "instructions"), ("native", None, "nanoseconds"),
                                               ("qemu-netduinoplus2", 4088, "instructions"))):
        js = tmp_path / f"hil-{k}.json"
        js.write_text(json.dumps({"ok": True, "target": target, "layout": "table", "variant": "dsp",
                                  "model": f"/somewhere/model{k}.json", "model_hash": f"{k}" * 16,
                                  "model_summary": {"algorithm": "efti", "size": f"{k + 5} leaves"},
                                  "flash_bytes": flash, "rows_per_s": 120.5, "insn_per_inference": 45.5,
                                  "counter_unit": unit}))
        reports.append(js)
    out = tmp_path / "hil.svg"
    code, _, err = run_cli(capsys, ["plot", "hil", *reports, "-o", out])
    assert code == 0, err
    text = _svg(out)
    for k in range(3):
        assert f"model{k}.json (efti, {k + 5} leaves)" in text and f"hil-{k}.json" in text
    assert "27,620 B (27.0 KiB)" in text and "e+04" not in text
    assert "45.5 instructions" in text and "45.5 nanoseconds" in text


def test_a_large_tree_is_drawn_readable(tmp_path):
    X, y = load_shared("veh")
    big = CARTClassifier().fit(X, y).model_
    assert big.trees[0].n_leaves > 60
    out = plot.plot_tree(big, tmp_path / "big.svg")
    text = _svg(out)
    sizes = [float(s) for s in re.findall(r"font(?:-size)?:\s*([\d.]+)px", text)]
    assert sizes and min(sizes) >= 8, sorted(set(sizes))[:5]          # was 5 px on a 40-inch canvas
    assert "leaves below" in text and "drawn to depth" in text
    deep = plot.plot_tree(big, tmp_path / "deep.svg", max_depth=2)
    assert "drawn to depth 2" in _svg(deep)
    small = CARTClassifier(max_depth=2).fit(X, y).model_
    assert "leaves below" not in _svg(plot.plot_tree(small, tmp_path / "small.svg"))
    model = tmp_path / "big.json"
    save(big, model)



def test_max_depth_option(tmp_path, capsys):
    X, y = load_shared("irs")
    model = tmp_path / "m.json"
    save(CARTClassifier().fit(X, y).model_, model)
    code, _, err = run_cli(capsys, ["plot", "tree", model, "-o", tmp_path / "t.svg", "--max-depth", "1"])
    assert code == 0, err
    assert "drawn to depth 1" in _svg(tmp_path / "t.svg")
    assert_user_error(capsys, ["plot", "tree", model, "-o", tmp_path / "x.svg", "--max-depth", "0"], "at least 1")
    assert_user_error(capsys, ["plot", "tune", model, "-o", tmp_path / "x.svg", "--max-depth", "2"],
                      "only applies to plot tree")
