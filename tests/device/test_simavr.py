"""simavr-uno: the arduino_uno image on simavr (templates/simavr/tg_simavr_board.c, treegen.device.simavr).

- Every multiply width of the generated scalar C on the 8-bit AVR, both layouts: an oblique EFTI tree
  with an int32 accumulator (2 features: int16 x int16 -> int32, libgcc's __mulhisi3, what QEMU 7.2's
  AVR machine got wrong) and one with an int64 accumulator (pid, 8 features: int64 x int16), --layout unrolled and
  table; the float entry point (PREDICT_RAW: the scaling's 32 x 32 -> 64 multiply) around every
  threshold: every row identical to the host's fixed-point model.
- BENCH counts CPU cycles (unit 1) and repeats exactly: the same totals on a fresh emulator, and
  whatever the host waits between requests (input enters the simulation only at fixed simulated
  instants).
- On-device training (hil --train, fit --engine device) on 30 rows x 2 attributes: identical to the
  host, the same cycles per iteration in two runs; the vicinal risk (rows in flash) refused.
- Bad input: the retired qemu-uno, libsimavr missing, an ELF simavr cannot load: one line each.

The soft-voting forest (PREDICT, PROBA, float entry) and protocol robustness on simavr-uno are in
test_silicon_targets.py. FAILS (never skips) when avr-gcc or libsimavr is missing (scripts/setup.sh).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error, load_shared, run_cli
from pio_projects import require_tools

from treegen import CARTClassifier, EFTIClassifier
from treegen.core.errors import TreegenError
from treegen.core.model import save
from treegen.device import simavr
from treegen.device.emulated import emulated_board
from treegen.device.hil import build_firmware, open_device, run_hil
from treegen.device.protocol import DeviceClient

pytestmark = pytest.mark.hil

TARGET = "simavr-uno"


def _two_features(n: int = 200, seed: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, size=(n, 2))
    y = (X[:, 0] - 0.7 * X[:, 1] > 1.5).astype(int) + (X[:, 0] + X[:, 1] > 12).astype(int)
    return X, y


@pytest.fixture(scope="module")
def oblique():
    """{accumulator bits: (model, X)}: EFTI trees whose node sums are int32 (2 features) and int64 (pid)."""
    X2, y2 = _two_features()
    Xp, yp = load_shared("pid")
    return {32: (EFTIClassifier(max_iter=1500, random_state=1).fit(X2, y2).model_, X2),
            64: (EFTIClassifier(max_iter=1500, random_state=2).fit(Xp, yp).model_, Xp)}


@pytest.fixture(scope="module")
def firmware(oblique, tmp_path_factory):
    require_tools("avr-gcc")
    root = tmp_path_factory.mktemp("simavr")
    return {(bits, layout): build_firmware(oblique[bits][0], TARGET, root / f"{bits}-{layout}", layout=layout)
            for bits in (32, 64) for layout in ("unrolled", "table")}


@pytest.mark.parametrize("layout", ["unrolled", "table"])
@pytest.mark.parametrize("bits", [32, 64])
def test_oblique_multiplies_identical_and_cycles_repeat(oblique, firmware, bits, layout):
    model, X = oblique[bits]
    fw = firmware[(bits, layout)]
    model_c = (fw.project / "src" / "model.c").read_text()
    assert f"int{bits}_t accumulator" in model_c and f"int{96 - bits}_t accumulator" not in model_c   # under test
    reports = [run_hil(model, TARGET, data=(X, None), build_dir=fw.project, layout=layout, bench_iters=150,
                       float_ulps=4 if layout == "table" else 0) for _ in range(2)]
    for rep in reports:
        assert rep["ok"], rep["error"] or rep["checks"]
        assert rep["mismatches"] == 0 and rep["rows"] == X.shape[0] and rep["firmware_reused"]
        assert rep["counter_unit"] == "cycles" and rep["device"]["target"] == "arduino_uno"
    if layout == "table":       # the float entry: integer scaling of float32 inputs next to every threshold
        fe = reports[0]["float_entry"]
        assert fe["mismatches"] == 0 and fe["breakpoints"] >= 3
    totals = [[r["total"] for r in rep["bench"]["rows"]] for rep in reports]
    assert totals[0] == totals[1] and len(set(totals[0])) > 1        # a fresh emulator: the same cycles
    assert all(t > 150 * 50 for t in totals[0])


def test_cycles_do_not_depend_on_host_timing(oblique, firmware):
    """The host waiting 0-60 ms before a request changes nothing: simulated time stands still while
    the firmware sleeps for input (a free-running simulation would shift Timer1's overflow interrupt
    into and out of the measured span)."""
    model, X = oblique[64]
    fw = firmware[(64, "unrolled")]
    rows = np.asarray(model.scaling.to_q15(X[:3]), dtype=np.int64)
    seen = set()
    with open_device(TARGET, firmware=fw, timeout=10, model=model) as dev:
        for delay in (0.0, 0.013, 0.06, 0.0, 0.031):
            time.sleep(delay)
            res = [dev.client.bench(r[None, :], 400) for r in rows]
            assert all(b.unit == 1 for b in res)                       # CPU cycles
            seen.add(tuple(b.total for b in res))
    assert len(seen) == 1, seen
    assert min(next(iter(seen))) > 65536                # each span holds Timer1 overflows


def test_cart_unrolled_on_simavr(tmp_path):
    """Axis-parallel code (no multiply), unrolled: every row identical."""
    X, y = _two_features(seed=9)
    model = CARTClassifier(max_depth=5).fit(X, y).model_
    rep = run_hil(model, TARGET, data=(X, None), build_dir=tmp_path / "cart", layout="unrolled", bench_iters=50)
    assert rep["ok"] and rep["mismatches"] == 0 and rep["counter_unit"] == "cycles", rep["error"]


def test_qemu_uno_is_retired_with_a_reason(capsys, tmp_path):
    X, y = _two_features()
    path = tmp_path / "m.json"
    save(CARTClassifier(max_depth=2).fit(X, y).model_, path)
    line = assert_user_error(capsys, ["build", path, "--target", "qemu-uno", "-o", tmp_path / "b"],
                             "qemu-uno was removed")
    assert "__mulhisi3" in line and "simavr-uno" in line


def test_missing_libsimavr_is_one_line_naming_the_packages(capsys, tmp_path, monkeypatch, firmware, oblique):
    monkeypatch.setattr(simavr, "INCLUDE_DIRS", (str(tmp_path / "none"),))
    with pytest.raises(TreegenError, match="install the Debian packages simavr libsimavr-dev"):
        simavr.board_program()
    path, csv = tmp_path / "m.json", tmp_path / "d.csv"
    save(oblique[32][0], path)
    X, y = _two_features()
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt=["%.6f", "%.6f", "%d"])
    assert_user_error(capsys, ["hil", path, "--target", TARGET, "--data", csv, "--no-header",
                               "-o", firmware[(32, "table")].project],
                      "simavr's library is missing: install the Debian packages simavr libsimavr-dev")


def test_unloadable_elf_is_reported(tmp_path):
    bad = tmp_path / "bad.elf"
    bad.write_bytes(b"not an elf")
    expected = r"simavr \(atmega328p\) exited early with status 2: .*cannot read the AVR ELF"
    with pytest.raises(TreegenError, match=expected):
        emulated_board(TARGET, bad).start()


def test_program_serves_one_client_then_the_next(firmware, oblique):
    """Like QEMU's server=on: the boot waits for a client; a client that leaves is replaced by the next."""
    with emulated_board(TARGET, firmware[(32, "table")].path) as board:
        for _ in range(2):
            with DeviceClient.open(board.url, timeout=10) as client:
                assert client.info().model_hash == oblique[32][0].hash()
        assert board.poll() is None


def _small_training_csv(tmp_path) -> Path:
    """30 rows x 2 attributes (every 5th irs row, petal length and width): what a 2 KiB Uno trains on."""
    X, y = load_shared("irs")
    classes, yi = np.unique(y, return_inverse=True)
    path = tmp_path / "irs30x2.csv"
    np.savetxt(path, np.column_stack([X[::5, 2:4], yi[::5]]), delimiter=",", fmt="%d", header="a2,a3,class",
               comments="")
    return path


def test_training_on_the_uno_identical_to_the_host(capsys, tmp_path):
    """hil --train on simavr-uno: the engine's exp table in program memory, the rows in the RAM buffer
    (TRAIN_DATA), depth lowered to what 2 KiB holds: tree, integer fitness and PREDICT_TRAINED identical
    to the host; the same cycles per iteration in a second run; fit --engine device writes that tree."""
    csv = _small_training_csv(tmp_path)
    model = tmp_path / "m.json"
    code, out, err = run_cli(capsys, ["fit", csv, "--algo", "efti", "--seed", "1", "-o", model, "-q"])
    assert code == 0, err
    speeds = []
    for run in range(2):
        code, out, err = run_cli(capsys, ["hil", model, "--target", TARGET, "--train", "--data", csv, "--iters", 400,
                                          "-o", tmp_path / "fw", "--json", tmp_path / f"r{run}.json", "-q"])
        assert code == 0, out + err
        rep = json.loads((tmp_path / f"r{run}.json").read_text())
        t = rep["train"]
        assert rep["ok"] and t["identical"] and t["tree_equal_host"] and rep["predict_trained"]["identical"]
        assert t["source"] == "ram" and t["engine"]["max_depth"] == 2 and t["counter_unit"] == "cycles"
        speeds.append((t["counter_total"], t["init_counter"]))
        ram = re.search(r"board memory    RAM (\d+) of 2048 bytes", out)
        assert "rows in RAM" in out and ram and 1024 < int(ram.group(1)) <= 2048 - 512    # the stack's 512 left
    assert speeds[0] == speeds[1]
    code, out, err = run_cli(capsys, ["fit", csv, "--algo", "efti", "--seed", "1", "--max-iter", "300", "--max-depth",
                                      "2", "--engine", "device", "--target", TARGET, "-o", tmp_path / "d.json", "-q"])
    assert code == 0, err


def test_vicinal_training_on_the_uno_is_refused_in_one_line(capsys, tmp_path):
    csv = _small_training_csv(tmp_path)
    model = tmp_path / "m.json"
    assert run_cli(capsys, ["fit", csv, "--algo", "cart", "--max-depth", "2", "-o", model, "-q"])[0] == 0
    assert_user_error(capsys, ["hil", model, "--target", TARGET, "--train", "--risk", "vicinal", "--data", csv,
                               "-o", tmp_path / "b"], "vicinal-risk training on the device needs the rows in flash")
