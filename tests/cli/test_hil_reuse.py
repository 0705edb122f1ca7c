"""``treegen hil`` reuses the firmware ``treegen build -o DIR`` made for the same model (issue 15):
no second build (the ELF's mtime and bytes are unchanged, the output says "reused"); another model in
the same folder is rebuilt, and the output names the model it replaced."""

from __future__ import annotations

import json
import shutil

from conftest import load_shared, run_cli
from pio_projects import require_tools

from treegen import CARTClassifier, save


def _data_csv(path, X, y):
    names = [f"a{i}" for i in range(X.shape[1])] + ["class"]
    rows = [",".join(map(str, r)) + f",{c}" for r, c in zip(X.tolist(), y.tolist())]
    path.write_text(",".join(names) + "\n" + "\n".join(rows) + "\n")
    return path


def test_hil_reuses_a_build_of_the_same_model(tmp_path, capsys):
    require_tools()
    X, y = load_shared("irs")
    X, y = X[::3], y[::3]
    data = _data_csv(tmp_path / "irs.csv", X, y)
    m1, m2 = tmp_path / "m1.json", tmp_path / "m2.json"
    save(CARTClassifier(max_depth=3).fit(X, y).model_, m1)
    save(CARTClassifier(max_depth=1).fit(X, y).model_, m2)
    fw = tmp_path / "fw"
    code, out, err = run_cli(capsys, ["build", m1, "--target", "qemu-m4", "-o", fw])
    assert code == 0, err
    elf = fw / ".pio" / "build" / "qemu_m4" / "firmware.elf"
    before = (elf.stat().st_mtime_ns, elf.read_bytes())
    hil = ["--target", "qemu-m4", "--data", data, "--bench-iters", "10", "-q"]

    # same model (variant dsp == the build's auto on Cortex-M4): reused, not rebuilt
    code, out, err = run_cli(capsys, ["hil", m1, *hil, "--build-dir", fw, "--variant", "dsp",
                                      "--json", tmp_path / "a.json"])
    assert code == 0, err
    assert f"firmware        {elf.resolve()}  (reused: already built for this model, layout and variant; " \
           "not rebuilt)" in out, out
    assert "result          PASS" in out
    assert (elf.stat().st_mtime_ns, elf.read_bytes()) == before
    rep = json.loads((tmp_path / "a.json").read_text())
    assert rep["firmware_reused"] is True and "build" not in rep["seconds"] and rep["flash_bytes"] > 0

    # another model: rebuilt, saying which model's build it replaced
    code, out, err = run_cli(capsys, ["hil", m2, *hil, "-o", fw, "--json", tmp_path / "b.json"])
    assert code == 0, err
    from treegen.core.model import load
    old_hash = load(m1).hash()
    assert f"; replaced the build of model {old_hash[:16]} there)" in out and "result          PASS" in out, out
    assert elf.read_bytes() != before[1]
    rep = json.loads((tmp_path / "b.json").read_text())
    assert rep["firmware_reused"] is False and rep["firmware_replaced"] == old_hash and rep["seconds"]["build"] > 0

    # ... which the next run reuses
    code, out, err = run_cli(capsys, ["hil", m2, *hil, "-o", fw])
    assert code == 0 and "(reused:" in out, out
    # a layout other than the build's: rebuilt
    code, out, err = run_cli(capsys, ["hil", m2, *hil, "-o", fw, "--layout", "unrolled"])
    assert code == 0 and "(reused:" not in out and "(built in" in out, out
    shutil.rmtree(fw)
