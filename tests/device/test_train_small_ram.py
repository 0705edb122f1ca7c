"""On-device training sized for small boards, and training as a fit engine.

- The engine's modes on the emulated twins of real boards (qemu-f103c8: 20 KiB RAM, qemu-l031k6: M0+
  code, 8 KiB RAM): rows compiled into flash, the lean engine (one leaf slot per row), the depth lowered
  until the engine fits; each bit-identical to the host (tree, integer fitness, PREDICT_TRAINED) and
  each firmware linked with the board's memory sizes (so it fits the real board).
- The partial engine with the data in flash on qemu-m4, and the profiling build (TRAIN_PROFILE).
- ``treegen fit --engine device --target qemu-m4`` writes the model ``--engine native`` writes.
- Bad input: a dataset too large for the target in every mode is one line naming rows x attributes,
  the need and the board's RAM/flash, and the largest row count that fits.

Small row counts and few iterations keep it fast. FAILS (never skips) when a tool is missing.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from conftest import DATASETS as SHARED_DATASETS
from conftest import assert_user_error, load_shared, run_cli
from pio_projects import require_tools

from treegen import CARTClassifier
from treegen.core.errors import TreegenError
from treegen.core.targets import get as get_target
from treegen.device import train_firmware as tf
from treegen.device.emulator import QemuBoard
from treegen.device.firmware import write_harness
from treegen.device.protocol import DeviceClient
from treegen.device.train_hil import PROFILE_PHASES, TrainingClient, build_train_firmware, run_train_hil
from treegen.learn.inducers.efti import EFTIParams

ITERS = 300


def data(name: str, rows: int | None = None):
    X, y = load_shared(name)
    classes, yi = np.unique(y, return_inverse=True)
    X, yi = X.astype(np.int64), yi.astype(np.int64)
    return (X[:rows], yi[:rows], len(classes)) if rows else (X, yi, len(classes))


def stump(X, y):
    return CARTClassifier(max_depth=1).fit(X, y).model_


@pytest.mark.parametrize("target,name,rows", [("qemu-f103c8", "veh", 400), ("qemu-l031k6", "liv", None)])
def test_twin_trains_in_flash_lean_and_fits_the_board(tmp_path, target, name, rows):
    require_tools()
    X, y, C = data(name, rows)
    spec = tf.make_train_spec(target, EFTIParams(), flash_data=(X, y, C), depth_auto=True)
    fw = build_train_firmware(stump(X, y), target, tmp_path / "fw", spec)
    tgt = get_target(target)
    s = fw.spec
    assert not s.partial and s.buffer_rows == 0 and s.flash_rows == X.shape[0]     # lean, rows in flash
    assert 1 <= s.max_depth < 8 and any("max_depth 8 ->" in n for n in s.notes)    # depth from RAM
    assert fw.ram_bytes <= tgt.ram_bytes and fw.flash_bytes <= tgt.flash_bytes     # linked with the board's sizes
    with QemuBoard(target, fw.path) as board, DeviceClient.open(board.url, timeout=30) as client:
        rep = run_train_hil(s.params, (X, y), client, 5, ITERS, n_classes=C, source="flash")
        ti = TrainingClient(client).info()
    t = rep["train"]
    assert rep["ok"] and t["identical"] and t["tree_equal_host"] and t["tree_equal_python"]
    assert t["device_fitness"] == t["host_fitness"] and rep["predict_trained"]["identical"]
    assert ti.ram_bytes == tf.train_static_bytes(s, ptr_bytes=4) and not ti.partial


def test_partial_engine_with_flash_rows_and_phase_profile(tmp_path):
    """qemu-m4: the partial engine (memorised sums, row lists, per-leaf plans) on rows in flash, in a
    profiling build: the phases add up to the iteration total (plus the counter reads) and nothing changes."""
    require_tools()
    X, y, C = data("gls")
    spec = replace(tf.make_train_spec("qemu-m4", EFTIParams(), flash_data=(X, y, C), partial=True), profile=True)
    fw = build_train_firmware(stump(X, y), "qemu-m4", tmp_path / "fw", spec)
    with QemuBoard("qemu-m4", fw.path) as board, DeviceClient.open(board.url, timeout=30) as client:
        rep = run_train_hil(spec.params, (X, y), client, 2, 2000, n_classes=C, source="flash",
                            python_reference=False)
        prof = TrainingClient(client).profile()
    assert rep["ok"] and rep["train"]["identical"] and rep["train"]["engine"]["partial"]
    assert prof is not None and prof["unit"] == "instructions"
    total = sum(prof[p] for p in PROFILE_PHASES)
    # the phases cover each iteration but the call of tg_efti_step and the harness's counter reads
    assert 0 <= rep["train"]["counter_total"] - total <= 200 * 2000
    assert prof["reclassify"] > 0 and prof["mutate"] > 0


def test_fit_engine_device_equals_native(tmp_path, capsys):
    require_tools()
    csv = SHARED_DATASETS / "gls.csv.gz"
    dev, nat = tmp_path / "dev.json", tmp_path / "nat.json"
    code, _, err = run_cli(capsys, ["fit", csv, "--algo", "efti", "--engine", "device", "--target", "qemu-m4",
                                      "--max-iter", ITERS, "--seed", 7, "-o", dev, "-q"])
    assert code == 0, err
    code, _, err = run_cli(capsys, ["fit", csv, "--algo", "efti", "--engine", "native", "--max-iter", ITERS,
                                    "--seed", 7, "-o", nat, "-q"])
    assert code == 0, err
    a, b = json.loads(dev.read_text()), json.loads(nat.read_text())
    for key in ("feature_names", "classes", "scaling", "trees"):
        assert a[key] == b[key], key
    ma, mb = a["metadata"], b["metadata"]
    assert ma["engine"] == "device" and ma["device_target"] == "qemu-m4" and mb["engine"] == "native"
    assert ma["fitness_int"] == mb["fitness_int"] and ma["train_accuracy"] == mb["train_accuracy"]
    assert {k: v for k, v in ma["params"].items() if k != "engine"} == \
        {k: v for k, v in mb["params"].items() if k != "engine"}


def test_fit_engine_device_bad_input(tmp_path, capsys):
    csv = SHARED_DATASETS / "irs.csv.gz"
    never = tmp_path / "never.json"
    assert_user_error(capsys, ["fit", csv, "--algo", "efti", "--engine", "device", "-o", never],
                      "--engine device needs --target")
    assert_user_error(capsys, ["fit", csv, "--algo", "efti", "--target", "qemu-m4", "-o", never],
                      "only apply with --engine device")
    assert_user_error(capsys, ["fit", csv, "--algo", "efti", "--engine", "device", "--target", "bluepill_f103c8",
                               "-o", never], "--port")
    assert_user_error(capsys, ["cv", csv, "--algo", "efti", "--engine", "device", "--target", "qemu-m4"],
                      "apply to fit only")


def test_too_large_for_every_mode_names_the_largest_row_count(tmp_path):
    X, y, C = data("veh")
    spec = tf.make_train_spec("qemu-l031k6", EFTIParams(), flash_data=(X, y, C), depth_auto=True)
    with pytest.raises(TreegenError) as exc:
        write_harness(stump(X, y), tmp_path / "never", target="qemu-l031k6", train=spec)
    msg = str(exc.value)
    assert "\n" not in msg and not (tmp_path / "never").exists()
    assert re.match(r"training needs \d+ KiB RAM, qemu-l031k6 has 8 KiB \(and \d+ KiB flash of 32 KiB\): "
                    r"846 rows x 18 attributes", msg), msg
    most = int(re.search(r"at most (\d+) rows would fit", msg).group(1))
    assert 2 <= most < 846
    fitting = tf.make_train_spec("qemu-l031k6", EFTIParams(), flash_data=(X[:most], y[:most], C), depth_auto=True)
    write_harness(stump(X, y), tmp_path / "ok", target="qemu-l031k6", train=fitting)        # that many fit
    over = tf.make_train_spec("qemu-l031k6", EFTIParams(), flash_data=(X[:most + 1], y[:most + 1], C),
                              depth_auto=True)
    with pytest.raises(TreegenError, match="at most"):
        write_harness(stump(X, y), tmp_path / "over", target="qemu-l031k6", train=over)


def test_cli_hil_train_on_a_twin_reports_mode_and_board_memory(tmp_path, capsys):
    require_tools()
    from treegen.core.model import save

    X, y = load_shared("liv")                      # original labels: the model's classes
    model_file = tmp_path / "liv.json"
    save(CARTClassifier(max_depth=2).fit(X, y).model_, model_file)
    code, out, err = run_cli(capsys, ["hil", model_file, "--target", "qemu-l031k6", "--data",
                                      SHARED_DATASETS / "liv.csv.gz", "--train", "--iters", ITERS, "-o",
                                      tmp_path / "b", "-q"])
    assert code == 0, err
    assert "IDENTICAL" in out and "result          PASS" in out
    assert re.search(r"engine .* lean, depth \d, rows in flash", out)
    assert re.search(r"board memory    RAM \d+ of 8192 bytes .*flash \d+ of 32768 bytes", out)


def test_fit_engine_device_at_a_port_streams_the_rows(tmp_path, capsys):
    """--port: a running training firmware without these rows in flash gets them streamed (TRAIN_DATA)."""
    require_tools()
    X, labels = load_shared("gls")
    spec = tf.make_train_spec("qemu-m4", EFTIParams(), max_rows=300, n_attr=9, n_classes=7)
    fw = build_train_firmware(CARTClassifier(max_depth=1).fit(X, labels).model_, "qemu-m4", tmp_path / "fw", spec)
    csv = SHARED_DATASETS / "gls.csv.gz"
    dev, nat = tmp_path / "dev.json", tmp_path / "nat.json"
    with QemuBoard("qemu-m4", fw.path) as board:
        code, out, err = run_cli(capsys, ["fit", csv, "--algo", "efti", "--engine", "device", "--target", "qemu-m4",
                                          "--port", board.url, "--max-iter", ITERS, "--seed", 7, "-o", dev])
    assert code == 0, err
    assert "streaming 214 rows x 9 attributes" in out and "(rows in ram)" in out
    code, _, err = run_cli(capsys, ["fit", csv, "--algo", "efti", "--engine", "native", "--max-iter", ITERS,
                                    "--seed", 7, "-o", nat, "-q"])
    assert code == 0, err
    assert json.loads(dev.read_text())["trees"] == json.loads(nat.read_text())["trees"]


def test_a_fixed_depth_that_does_not_fit_names_the_depth_that_would(tmp_path):
    """fit --engine device --max-depth 8 (or its default) on a 16 KiB part: the one line says which
    --max-depth takes every row, and that depth does fit."""
    X, y, C = data("irs")
    spec = tf.make_train_spec("qemu-hifive1", EFTIParams(max_depth=8), flash_data=(X, y, C))
    with pytest.raises(TreegenError) as exc:
        write_harness(stump(X, y), tmp_path / "never", target="qemu-hifive1", train=spec)
    msg = str(exc.value)
    hint = re.search(r"; all 150 fit with --max-depth (\d+)$", msg)
    assert hint and "\n" not in msg, msg
    depth = int(hint.group(1))
    assert 1 <= depth < 8
    ok = tf.make_train_spec("qemu-hifive1", EFTIParams(max_depth=depth), flash_data=(X, y, C))
    write_harness(stump(X, y), tmp_path / "ok", target="qemu-hifive1", train=ok)
    deeper = tf.make_train_spec("qemu-hifive1", EFTIParams(max_depth=depth + 1), flash_data=(X, y, C))
    with pytest.raises(TreegenError, match="rows would fit"):
        write_harness(stump(X, y), tmp_path / "deeper", target="qemu-hifive1", train=deeper)
