"""Plain words in human output: fitness as a fraction, 'up to N classes', no bare 'F 2101305999360'."""

from __future__ import annotations

import numpy as np

from tests.conftest import run_cli
from treegen.device.train_hil import fitness_text, summary_lines


def _train(device, host, rows=100):
    return {"identical": device == host, "device_fitness": device, "host_fitness": host, "float_fitness": None,
            "fitness_tolerance": 0, "rows": rows, "n_nodes": 3, "n_leaves": 2, "depth": 1, "hits": 97,
            "seed": 0, "iterations": 10, "insn_per_iteration": None, "counter_per_iteration": 5.0,
            "counter_unit": "ns", "ram_bytes": 100, "engine": {"partial": True, "max_depth": 4, "dsp": False},
            "source": "flash"}


def test_fitness_is_printed_as_a_fraction():
    same = int(0.97 * 100 * 2**32)
    text = fitness_text(_train(same, same))
    assert text == (f"fitness 0.970000 on the device and the host (accuracy with the size penalty; the exact "
                    f"integer {same} on both)")
    lines = summary_lines({"train": _train(same, same)})
    assert lines[0].startswith("train           IDENTICAL trees: fitness 0.970000 on the device and the host")
    assert not any(" F " in line for line in lines)
    diff = fitness_text(_train(same, same - 2**32))
    assert diff.startswith("fitness 0.970000 on the device, 0.960000 on the host (exact integers")


def test_export_train_says_up_to_n_classes(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 100, size=(40, 3))
    y = (X[:, 0] > 50).astype(int) + (X[:, 1] > 70)
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,c,label\n" + "".join(f"{r[0]},{r[1]},{r[2]},{c}\n" for r, c in zip(X, y)))
    code, out, err = run_cli(capsys, ["export", csv, "--train", "--target", "cortex-m4", "-o", tmp_path / "lib"])
    assert code == 0, err
    assert "40 rows x 3 attributes, up to 3 classes" in out and "classes 2.." not in out
    assert "iterations in the example main, oversize weight" in out and "max_iter" not in out
