"""On-device training: the C EFTI engine in the firmware harness evolves, for a seed and data, the
tree the host evolves (treegen.learn.engine.induce, and the Python EFTI), bit for bit; PREDICT_TRAINED
equals treegen.emit.quantize.predict_q15 of that tree.

Devices: the native harness (host compiler, ASan/UBSan) over its pseudo-terminal, and the emulated
boards qemu-m3 (scalar), qemu-m4 (scalar and SMLALD/DSP builds), qemu-m33 (SMLALD/DSP build, irs
only) and qemu-m55 (Helium/MVE build, gls only) over QEMU's socket UART. Each
firmware is built once per session, sized for the largest of the three datasets (veh 846 x 18,
4 classes; gls 214 x 9, 6 classes; irs 150 x 4, 3 classes).

Bad input: RAM budget exceeded (before building), more rows / attributes / classes than the engine
was generated for, zero iterations, TRAIN before data, a link dropped mid-training: one-line errors,
never a report of success.

FAILS (never skips) when a compiler or QEMU is missing (scripts/setup.sh).
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import DATASETS as SHARED_DATASETS
from conftest import load_shared
from pio_projects import require_tools

from treegen import CARTClassifier
from treegen.core.errors import TreegenError
from treegen.device import train_firmware as tf
from treegen.device.emulator import QemuBoard
from treegen.device.firmware import NativeDevice, build_native, write_harness
from treegen.device.protocol import CAP_TRAIN, DeviceClient, DeviceError, ErrorCode, LinkLost, MsgType
from treegen.device.train_hil import TrainingClient, build_train_firmware, run_train_hil
from treegen.learn import engine
from treegen.learn.inducers.efti import EFTIParams

DATASETS = ("veh", "gls", "irs")
SEEDS = (1, 2)
NATIVE_ITERS = 3000
QEMU_ITERS = 300
PARAMS = EFTIParams()                         # the reference defaults (depth 8)
QEMU_BUILDS = {"qemu-m3": "scalar", "qemu-m4-dsp": "dsp", "qemu-m4-scalar": "scalar"}

_cache: dict = {}


def data(name: str):
    """(Q15 rows, class indices, n_classes) of a shared dataset."""
    if name not in _cache:
        X, y = load_shared(name)
        classes, yi = np.unique(y, return_inverse=True)
        _cache[name] = (X.astype(np.int64), yi.astype(np.int64), len(classes))
    return _cache[name]


def sizes() -> dict:
    all_data = [data(n) for n in DATASETS]
    return {"max_rows": max(X.shape[0] for X, _, _ in all_data), "n_attr": max(X.shape[1] for X, _, _ in all_data),
            "n_classes": max(C for _, _, C in all_data)}


def host_model():
    """The inference model the harness also serves (any model: training has its own data)."""
    if "model" not in _cache:
        X, y = load_shared("veh")
        _cache["model"] = CARTClassifier(max_depth=3).fit(X, y).model_
    return _cache["model"]


def assert_identical(rep: dict, n_rows: int, iters: int):
    t = rep["train"]
    assert rep["ok"], rep
    assert t["identical"] and t["tree_equal_host"] and t["tree_equal_python"]
    assert t["device_fitness"] == t["host_fitness"] == t["python_fitness"]
    assert t["float_fitness"] == t["device_fitness"] / (n_rows * 2.0 ** 32)        # tolerance 0
    assert t["iterations"] == iters
    assert rep["predict_trained"]["identical"] and rep["predict_trained"]["agree"] == n_rows


# ---------------------------------------------------------------------- native
@pytest.fixture(scope="module")
def native_exe(tmp_path_factory):
    """The native training harness (sanitizers on), with irs compiled into flash as well."""
    require_tools("cc")
    X, y, C = data("irs")
    spec = tf.make_train_spec("native", PARAMS, flash_data=(X, y, C), flash_source="irs.csv.gz", **sizes())
    fw = build_train_firmware(host_model(), "native", tmp_path_factory.mktemp("train-native"), spec, sanitize=True)
    return fw


@pytest.fixture
def native(native_exe):
    dev = NativeDevice(native_exe.path)
    port = dev.start()
    client = DeviceClient.open(port, timeout=10)
    try:
        yield client, dev
    finally:
        client.close()
        dev.stop(check=not dev.killed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", DATASETS)
def test_native_device_equals_host(native, name, seed):
    client, _ = native
    X, y, C = data(name)
    rep = run_train_hil(PARAMS, (X, y), client, seed, NATIVE_ITERS)
    assert_identical(rep, X.shape[0], NATIVE_ITERS)
    assert rep["train"]["counter_unit"] == "nanoseconds" and rep["train"]["insn_per_iteration"] is None


def test_native_flash_data_and_info(native, native_exe):
    client, _ = native
    info = client.info()
    assert info.capabilities & CAP_TRAIN
    tc = TrainingClient(client)
    ti = tc.info()
    spec = native_exe.spec
    assert (ti.max_rows, ti.max_attr, ti.max_classes, ti.max_depth) == (846, 18, 6, 8)
    assert ti.has_flash_data and (ti.flash_rows, ti.flash_attr, ti.flash_classes) == (150, 4, 3)
    assert ti.buffer_rows == 846 and ti.stored_rows == 0 and ti.partial and not ti.dsp
    assert ti.params_digest == tf.params_digest(PARAMS).hex()
    assert ti.ram_bytes == tf.train_static_bytes(spec, ptr_bytes=8)        # the estimate is exact
    X, y, C = data("irs")
    rep = run_train_hil(PARAMS, (X, y), client, 5, NATIVE_ITERS, source="flash")
    assert_identical(rep, X.shape[0], NATIVE_ITERS)
    assert tc.info().stored_rows == 0                                       # nothing went through RAM


def test_native_errors_are_error_frames(native):
    client, _ = native
    tc = TrainingClient(client)

    def code(fn):
        with pytest.raises(DeviceError) as exc:
            fn()
        return ErrorCode(exc.value.code).name

    X, y, C = data("gls")
    assert code(lambda: tc.train(1, 10, 10)) == "NO_DATA"                   # TRAIN before any data
    assert code(lambda: tc.tree(C)) == "NOT_TRAINED"
    assert code(lambda: tc.predict(X[:2])) == "NOT_TRAINED"
    assert tc.send_data(X, y, C) == X.shape[0]
    wide = np.hstack([X[:3]] + [X[:3, :1]] * 10)                            # 19 attributes > 18
    assert code(lambda: tc.store(0, wide, y[:3], C)) == "TOO_LARGE"
    assert code(lambda: tc.store(0, X[:3], y[:3], 7)) == "TOO_LARGE"        # 7 classes > 6
    assert code(lambda: tc.store(215, X[:1], y[:1], C)) == "BAD_PAYLOAD"    # a gap after the stored rows
    assert tc.send_data(np.vstack([X] * 4)[:846], np.tile(y, 4)[:846], C) == 846      # the buffer is full
    assert code(lambda: tc.store(846, X[:1], y[:1], C)) == "TOO_LARGE"     # row 847 > the 846 generated for
    assert tc.send_data(X, y, C) == X.shape[0]
    assert code(lambda: tc.store(0, X[:2], np.array([0, 6]), C)) == "BAD_PAYLOAD"   # label >= n_classes
    assert code(lambda: client.request(MsgType.TRAIN_DATA, struct.pack("<IHHH", 0, 1, 1, 2) + b"\xff\xff\x00")) \
        == "BAD_PAYLOAD"                                                     # negative Q15 value
    assert tc.info().stored_rows == X.shape[0]                              # errors changed nothing
    assert code(lambda: tc.train(1, 0, X.shape[0])) == "BAD_PAYLOAD"        # zero iterations
    assert code(lambda: tc.train(1, 10, X.shape[0] + 1)) == "BAD_PAYLOAD"   # more rows than stored
    assert code(lambda: client.request(MsgType.TRAIN, b"\x00" * 16)) == "BAD_PAYLOAD"
    res = tc.train(3, 50, X.shape[0])
    assert res.iterations == 50 and res.n_nodes >= 3
    assert code(lambda: client.request(MsgType.TREE_GET, struct.pack("<HH", res.n_nodes + 1, 1))) == "BAD_PAYLOAD"
    assert code(lambda: client.request(MsgType.PREDICT_TRAINED, struct.pack("<H", 1) + b"\x00" * 4)) == "BAD_PAYLOAD"
    assert tc.tree(C).n_nodes == res.n_nodes


def test_host_checks_before_streaming(native):
    client, _ = native
    X, y, C = data("veh")
    with pytest.raises(TreegenError, match=r"data have 900 rows, more than the device's RAM buffer holds \(846"):
        run_train_hil(PARAMS, (np.vstack([X, X[:54]]), np.concatenate([y, y[:54]])), client, 1, 10)
    with pytest.raises(TreegenError, match="data have 19 attributes, more than the device's engine holds"):
        run_train_hil(PARAMS, (np.hstack([X, X[:, :1]]), y), client, 1, 10)
    with pytest.raises(TreegenError, match="data have 7 classes"):
        run_train_hil(PARAMS, (X, y), client, 1, 10, n_classes=7)
    with pytest.raises(TreegenError, match="n_iter must be at least 1"):
        run_train_hil(PARAMS, (X, y), client, 1, 0)
    with pytest.raises(TreegenError, match="generated for other EFTI parameters"):
        run_train_hil(EFTIParams(oversize_weight=0.02), (X, y), client, 1, 10)
    with pytest.raises(TreegenError, match="not the 846 x 18"):
        run_train_hil(PARAMS, (X, y), client, 1, 10, stream=False)        # nothing stored yet


def test_native_link_dropped_mid_training(native):
    client, dev = native
    X, y, C = data("veh")
    timers = []

    def log(msg):
        if msg.startswith("training on the device"):
            timers.append(threading.Timer(0.3, dev.kill))
            timers[-1].start()

    with pytest.raises(LinkLost) as exc:
        run_train_hil(PARAMS, (X, y), client, 1, 10 ** 8, log=log)
    msg = str(exc.value)
    assert "\n" not in msg and "link lost while waiting for the response to TRAIN" in msg
    assert dev.killed


def test_inference_only_firmware_is_unchanged(tmp_path):
    """Without train=..., no training file is written, INFO has no TRAIN bit, 0x05 is unknown."""
    files = write_harness(host_model(), tmp_path / "src", target="native")
    names = {p.name for p in files}
    assert not names & set(tf.HARNESS_TRAIN_FILES)
    assert "#define TG_GLUE_HAS_TRAIN 0" in (tmp_path / "src" / "tg_model_glue.h").read_text()
    exe = build_native(host_model(), tmp_path / "build")
    with NativeDevice(exe) as port, DeviceClient.open(port, timeout=5) as client:
        assert not client.info().capabilities & CAP_TRAIN
        with pytest.raises(DeviceError, match="UNKNOWN_TYPE"):
            client.request(MsgType.TRAIN_INFO)
        X, y, C = data("irs")
        with pytest.raises(TreegenError, match="no on-device training"):
            run_train_hil(PARAMS, (X, y), client, 1, 10)


# ---------------------------------------------------------------------- generation-time checks
def test_ram_check_fails_before_anything_is_written(tmp_path):
    spec = tf.make_train_spec("bluepill_f103c8", PARAMS, max_rows=846, n_attr=18, n_classes=4)
    out = tmp_path / "never"
    with pytest.raises(TreegenError, match=r"^training needs \d+ KiB RAM, bluepill_f103c8 has 20 KiB") as exc:
        write_harness(host_model(), out, target="bluepill_f103c8", train=spec)
    assert "\n" not in str(exc.value)
    assert not out.exists()
    big = tf.make_train_spec("qemu-m3", PARAMS, max_rows=400_000, n_attr=18, n_classes=4)
    with pytest.raises(TreegenError, match=r"^training needs \d+ KiB RAM, qemu-m3 has 4096 KiB"):
        write_harness(host_model(), out, target="qemu-m3", train=big)


def test_partial_reclassification_dropped_when_only_that_fits(tmp_path):
    """nucleo_f446re (128 KiB): veh fits without the memorised projections, which change nothing."""
    spec = tf.make_train_spec("nucleo_f446re", PARAMS, max_rows=846, n_attr=18, n_classes=4)
    write_harness(host_model(), tmp_path, target="nucleo_f446re", train=spec)
    assert "#define TG_EFTI_PARTIAL     0" in (tmp_path / "tg_efti.h").read_text()
    with pytest.raises(TreegenError, match="training needs"):
        write_harness(host_model(), tmp_path / "b", target="nucleo_f446re",
                      train=tf.make_train_spec("nucleo_f446re", PARAMS, max_rows=846, n_attr=18, n_classes=4,
                                               partial=True))


# ---------------------------------------------------------------------- QEMU
@pytest.fixture(scope="module")
def qemu_builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("train-qemu")

    def get(key: str):
        if key not in _cache:
            require_tools()
            target = key[:7]
            spec = tf.make_train_spec(target, PARAMS, dsp=QEMU_BUILDS[key], **sizes())
            _cache[key] = build_train_firmware(host_model(), target, root / key, spec)
        return _cache[key]
    return get


@pytest.mark.hil
@pytest.mark.parametrize("name", DATASETS)
@pytest.mark.parametrize("key", sorted(QEMU_BUILDS))
def test_qemu_device_equals_host(qemu_builds, key, name):
    fw = qemu_builds(key)
    X, y, C = data(name)
    with QemuBoard(fw.target, fw.path) as board, DeviceClient.open(board.url, timeout=20) as client:
        ti = TrainingClient(client).info()
        assert ti.dsp == (QEMU_BUILDS[key] == "dsp") and ti.partial
        assert ti.ram_bytes == tf.train_static_bytes(fw.spec, ptr_bytes=4)
        for i, seed in enumerate(SEEDS):
            rep = run_train_hil(PARAMS, (X, y), client, seed, QEMU_ITERS, stream=i == 0)
            assert_identical(rep, X.shape[0], QEMU_ITERS)
            t = rep["train"]
            assert t["counter_unit"] == "instructions" and 1000 < t["insn_per_iteration"] < 10_000_000
        assert board.poll() is None


def test_training_variant_auto_and_refusals():
    """auto: Helium on the M55, SMLALD on DSP cores, scalar elsewhere; an extension the core lacks is
    one line naming it."""
    picks = {t: tf.make_train_spec(t, PARAMS, max_rows=100, n_attr=8, n_classes=3).variant
             for t in ("qemu-m55", "cortex-m55", "qemu-m4", "qemu-m33", "qemu-m3")}
    assert picks == {"qemu-m55": "mve", "cortex-m55": "mve", "qemu-m4": "dsp", "qemu-m33": "dsp", "qemu-m3": "scalar"}
    assert tf.make_train_spec("qemu-m55", PARAMS, max_rows=100, n_attr=8, n_classes=3, dsp="dsp").variant == "dsp"
    for target, variant in (("qemu-m4", "mve"), ("qemu-m3", "dsp")):
        with pytest.raises(TreegenError, match=f"^variant '{variant}' needs") as exc:
            tf.make_train_spec(target, PARAMS, max_rows=100, n_attr=8, n_classes=3, dsp=variant)
        assert "\n" not in str(exc.value)


def test_device_engine_refuses_attribute_sampling_per_node():
    """The device engine is built without TG_EFTI_NODE_SAMPLING: node_features is refused, not ignored;
    the parameter digest of the default (off) is the one it always was."""
    with pytest.raises(TreegenError, match="no attribute sampling per node"):
        tf.make_train_spec("qemu-m4", replace(PARAMS, node_features=3), max_rows=100, n_attr=8, n_classes=3)
    assert tf.params_digest(replace(PARAMS, node_features=0)) == tf.params_digest(PARAMS)
    assert tf.params_digest(EFTIParams()).hex() == "781e8108bceaad4f"


@pytest.mark.hil
def test_qemu_m33_training_equals_host(tmp_path):
    """qemu-m33 (mps2-an505, ARMv8-M Mainline with the DSP extension) with --variant auto: the SMLALD
    engine reports dsp in TRAIN_INFO and evolves the host's tree on irs (lean: one firmware sized for
    irs, one seed; issue 24: no test trained on this core)."""
    require_tools()
    X, y, C = data("irs")
    spec = tf.make_train_spec("qemu-m33", PARAMS, max_rows=X.shape[0], n_attr=X.shape[1], n_classes=C)
    assert spec.variant == "dsp"
    fw = build_train_firmware(host_model(), "qemu-m33", tmp_path / "m33", spec)
    with QemuBoard(fw.target, fw.path) as board, DeviceClient.open(board.url, timeout=20) as client:
        ti = TrainingClient(client).info()
        assert ti.variant == "dsp" and ti.dsp and not ti.mve and ti.partial
        assert ti.ram_bytes == tf.train_static_bytes(fw.spec, ptr_bytes=4)
        rep = run_train_hil(PARAMS, (X, y), client, 2, QEMU_ITERS)
        assert_identical(rep, X.shape[0], QEMU_ITERS)
        assert rep["train"]["engine"]["variant"] == "dsp" and rep["train"]["counter_unit"] == "instructions"
        assert board.poll() is None


@pytest.mark.hil
def test_qemu_m55_mve_training_equals_host(tmp_path):
    """qemu-m55 with --variant auto: the Helium (VMLALDAVA) engine reports mve in TRAIN_INFO and evolves
    the host's tree (gls: 9 attributes = one full vector and a one-lane tail)."""
    require_tools()
    X, y, C = data("gls")
    spec = tf.make_train_spec("qemu-m55", PARAMS, max_rows=X.shape[0], n_attr=X.shape[1], n_classes=C)
    assert spec.variant == "mve"
    fw = build_train_firmware(host_model(), "qemu-m55", tmp_path / "m55", spec)
    with QemuBoard(fw.target, fw.path) as board, DeviceClient.open(board.url, timeout=20) as client:
        ti = TrainingClient(client).info()
        assert ti.variant == "mve" and ti.mve and not ti.dsp and ti.partial
        rep = run_train_hil(PARAMS, (X, y), client, 3, QEMU_ITERS)
        assert_identical(rep, X.shape[0], QEMU_ITERS)
        assert rep["train"]["engine"]["variant"] == "mve"
        assert board.poll() is None


@pytest.mark.hil
def test_qemu_ram_estimate_bounds_the_elf(qemu_builds):
    for key in ("qemu-m3", "qemu-m4-dsp"):
        fw = qemu_builds(key)
        est = tf.estimate_ram(fw.spec, fw.target, max_payload=1024, n_features=host_model().n_features)
        assert fw.ram_bytes <= est["total"] <= fw.ram_bytes + 4096, (fw.ram_bytes, est)


@pytest.mark.hil
def test_qemu_errors_and_link_dropped(qemu_builds):
    fw = qemu_builds("qemu-m4-dsp")
    X, y, C = data("irs")
    board = QemuBoard(fw.target, fw.path)
    board.start()
    try:
        with DeviceClient.open(board.url, timeout=20) as client:
            tc = TrainingClient(client)
            with pytest.raises(DeviceError, match="NO_DATA"):
                tc.train(1, 10, 10, source="flash")                  # no data compiled into this firmware
            with pytest.raises(DeviceError, match="NO_DATA"):
                tc.train(1, 10, 10)
            with pytest.raises(DeviceError, match="TOO_LARGE"):
                tc.store(0, X[:2], y[:2], 7)
            timers = []

            def log(msg):
                if msg.startswith("training on the device"):
                    timers.append(threading.Timer(0.5, board.close))
                    timers[-1].start()

            with pytest.raises(LinkLost) as exc:
                run_train_hil(PARAMS, (X, y), client, 1, 10 ** 8, log=log)
            assert "\n" not in str(exc.value) and "TRAIN" in str(exc.value)
    finally:
        board.close()


# ---------------------------------------------------------------------- export --train
def _run_cli(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "treegen", *argv], capture_output=True, text=True)


def test_export_train_library_from_data_runs_and_matches_the_host(tmp_path):
    require_tools("cc")
    csv = SHARED_DATASETS / "gls.csv.gz"
    out = tmp_path / "lib"
    r = _run_cli("export", str(csv), "--train", "--target", "native", "-o", str(out), "--max-depth", "6",
                 "--example")
    assert r.returncode == 0, r.stderr
    assert "tg_efti_config.c" in r.stdout and "RAM" in r.stdout and "example/main.c" in r.stdout
    assert not (out / "main.c").exists()            # the library folder holds no main()
    sources = [str(p) for p in sorted(out.glob("*.c"))] + [str(out / "example" / "main.c")]
    exe = tmp_path / "example"
    cc = subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-pedantic", "-O2",
                         "-DTG_EXAMPLE_ITERATIONS=2500u", "-I", str(out), "-o", str(exe), *sources],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    fitness = int(re.search(r"^fitness (\d+)", run.stdout, re.M).group(1))
    X, y, C = data("gls")
    t, info = engine.induce(X / 32768.0, y, C, EFTIParams(max_iter=2500, max_depth=6), seed=1)
    assert fitness == info["fitness_int"]
    assert int(re.search(r"^nodes (\d+)", run.stdout, re.M).group(1)) == t.n_nodes


def test_export_train_library_from_a_model_for_cortex_m4(tmp_path):
    require_tools("arm-none-eabi-gcc")
    from treegen.core.model import save

    model_file = tmp_path / "veh.json"
    save(host_model(), model_file)
    out = tmp_path / "lib"
    r = _run_cli("export", str(model_file), "--train", "--target", "cortex-m4", "-o", str(out), "--max-rows", "500",
                 "--example")
    assert r.returncode == 0, r.stderr
    for src in ("tg_efti.c", "tg_efti_config.c", "example/main.c"):
        cc = subprocess.run(["arm-none-eabi-gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion",
                             "-pedantic", "-mcpu=cortex-m4", "-mthumb", "-Os", "-DTG_EXAMPLE_NO_STDIO",
                             "-I", str(out), "-c", str(out / src), "-o", str(tmp_path / (Path(src).name + ".o"))],
                            capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr
    r = _run_cli("export", str(model_file), "--train", "--target", "nucleo_l031k6", "-o", str(tmp_path / "x"),
                 "--max-rows", "500")
    assert r.returncode == 2 and re.match(r"treegen: error: training needs \d+ KiB RAM, nucleo_l031k6 has 8 KiB",
                                          r.stderr), r.stderr
    r = _run_cli("export", str(model_file), "--train", "--target", "cortex-m4", "-o", str(tmp_path / "y"))
    assert r.returncode == 0 and "846 rows x 18 attributes, up to 4 classes, depth 8" in r.stdout   # the model's n_train
    assert "partial reclassification is off" in r.stdout                  # 128 KiB: only without it
    bare = CARTClassifier(max_depth=3).fit(*load_shared("veh")).model_
    bare.metadata = {k: v for k, v in bare.metadata.items() if k != "n_train"}
    save(bare, model_file)
    r = _run_cli("export", str(model_file), "--train", "--target", "cortex-m4", "-o", str(tmp_path / "z"))
    assert r.returncode == 2 and "--max-rows is needed" in r.stderr


# ---------------------------------------------------------------------- treegen hil --train
def test_cli_hil_train_native(tmp_path):
    import json

    from treegen.core.model import save

    model_file = tmp_path / "veh.json"
    save(host_model(), model_file)
    report = tmp_path / "train.json"
    r = _run_cli("hil", str(model_file), "--target", "native", "--data", str(SHARED_DATASETS / "veh.csv.gz"),
                 "--train", "--iters", "800", "--seed", "4", "-o", str(tmp_path / "build"), "--json", str(report), "-q")
    assert r.returncode == 0, r.stderr
    assert "IDENTICAL" in r.stdout and "result          PASS" in r.stdout
    rep = json.loads(report.read_text())
    t = rep["train"]
    assert rep["ok"] and rep["mode"] == "train" and t["identical"] and t["iterations"] == 800 and t["seed"] == 4
    assert t["device_fitness"] == t["host_fitness"] and rep["predict_trained"]["agree"] == 846
    # veh fits the 8 KiB Nucleo-L031K6 in no mode: one line with the largest row count that would
    # (the 20 KiB Blue Pill now takes it: rows in flash, lean engine, depth from RAM; tests/device/test_train_small_ram.py)
    r = _run_cli("hil", str(model_file), "--target", "nucleo_l031k6", "--data",
                 str(SHARED_DATASETS / "veh.csv.gz"), "--train", "-o", str(tmp_path / "bp"))
    assert r.returncode == 2
    assert re.search(r"^treegen: error: training needs \d+ KiB RAM, nucleo_l031k6 has 8 KiB .*846 rows x 18 "
                     r"attributes.*at most \d+ rows would fit(; all 846 fit with --max-depth \d+)?$", r.stderr, re.M)
    assert "PASS" not in r.stdout and "IDENTICAL" not in r.stdout
