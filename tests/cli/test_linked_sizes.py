"""``treegen export`` and ``treegen build`` report what the model costs in a linked image (library
routines included) beside the object-file / firmware figures, and say which is which (issue 23)."""

from __future__ import annotations

import json
import re

from conftest import load_shared, run_cli
from pio_projects import require_tools

from treegen import EFTIClassifier, save
from treegen.emit.size import section_function


def _float_model(tmp_path):
    X, y = load_shared("irs")
    est = EFTIClassifier(max_iter=300, random_state=1).fit(X / 3276.8 - 1.5, y)  # min-max: float32 contract
    assert est.model_.contract == "float32"
    return save(est.model_, tmp_path / "irsf.json")


def test_export_prints_object_and_linked_sizes(tmp_path, capsys):
    model = _float_model(tmp_path)
    code, out, err = run_cli(capsys, ["export", model, "--target", "cortex-m0plus", "-o", tmp_path / "out",
                                      "--json", tmp_path / "r.json"])
    assert code == 0, err
    rep = json.loads((tmp_path / "r.json").read_text())
    rep = rep.get("report", rep)
    scaling = sum(v for k, v in rep["sections"].items()
                  if section_function(k) in {f".text.tg_{rep['name']}_{fn}"
                                             for fn in ("scale_q15", "q15", "shr", "rne", "round53")})
    assert scaling > 400 and rep["flash_bytes_inference"] <= rep["flash_bytes"] - scaling  # raw-input path left out
    obj = re.search(r"^flash / RAM     (\d+) / (\d+) bytes.*\n\s+\(arm-none-eabi-size of the object", out, re.M)
    linked = re.search(r"^linked          Q15 entry tg_\w+_predict_q15: (\d+) / (\d+) bytes; float entry "
                       r"tg_\w+_predict: (\d+) / (\d+) bytes flash / RAM\n\s+\(linked image with the model minus",
                       out, re.M)
    assert obj and linked, out
    q15, flt = int(linked.group(1)), int(linked.group(3))
    # no soft-double in the float entry: the integer scaling costs about a kilobyte more than the Q15 path,
    # not the 4.7 KB of soft double it took on Cortex-M0+
    assert 0 < q15 < flt < q15 + 2000, out
    assert "exact           yes, for every float32 input" in out


def test_build_prints_the_model_linked_cost(tmp_path, capsys):
    require_tools()
    model = _float_model(tmp_path)
    code, out, err = run_cli(capsys, ["build", model, "--target", "qemu-m4", "-o", tmp_path / "fw"])
    assert code == 0, err
    assert re.search(r"^model linked    Q15 entry \d+ / \d+ bytes; float entry \d+ / \d+ bytes flash / RAM  "
                     r"\(linked image", out, re.M), out
