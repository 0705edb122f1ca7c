"""The firmware harness built for the host (native target, ASan/UBSan) and driven over its
pseudo-terminal with pyserial, exactly as a board on /dev/ttyACM0 would be.

Real exported models (EFTI on veh: oblique; CART on seg: axis-parallel) are checked against the
Python fixed-point model; a hand-written stub model (300 classes, u16 class bytes) with a fake
12-bit counter checks BENCH's counter-wrap handling exactly. Every test runs its own device process
(startup takes milliseconds); the NativeDevice teardown fails the test if the device exited with a
non-zero status by itself (e.g. a sanitizer report).
"""

from __future__ import annotations

import shutil
import stat
import struct
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import load_shared
from raw_frames import error_fields, raw_response

import treegen
from treegen import CARTClassifier, EFTIClassifier
from treegen.core import targets
from treegen.core.errors import TreegenError
from treegen.device.firmware import (NATIVE_EXECUTABLE, SANITIZE_CFLAGS, STRICT_CFLAGS, NativeDevice, build_native,
                                     render_harness, write_harness)
from treegen.device.protocol import (CAP_BENCH, CAP_PREDICT, CAP_RAW, DeviceClient, DeviceError, DeviceTimeout, ErrorCode,
                                     LinkLost, MsgType, ProtocolError, encode_frame)
from treegen.emit.quantize import predict_model_q15, quantize_model

ARM_STRICT = [*STRICT_CFLAGS, "-Os", "-mthumb"]


# ---------------------------------------------------------------------- builds (once per module)
@pytest.fixture(scope="module")
def models() -> dict:
    X, y = load_shared("veh")
    efti = EFTIClassifier(max_iter=2000, random_state=1).fit(X, y).model_
    X2, y2 = load_shared("seg")
    cart = CARTClassifier().fit(X2, y2).model_
    return {"efti-veh": (efti, X), "cart-seg": (cart, X2)}


@pytest.fixture(scope="module")
def builds(models, tmp_path_factory):
    cache = {}

    def get(key: str):
        if key not in cache:
            model, X = models[key]
            exe = build_native(model, tmp_path_factory.mktemp(key), sanitize=True)
            cache[key] = (model, X, exe)
        return cache[key]
    return get


@pytest.fixture(params=["efti-veh", "cart-seg"])
def built(request, builds):
    return builds(request.param)


def _serve(exe, timeout=5.0):
    dev = NativeDevice(exe)
    port = dev.start()
    client = DeviceClient.open(port, timeout=timeout)
    return dev, client


@pytest.fixture
def device(built):
    """(client, NativeDevice, model, X) for each real model; the device must exit cleanly at the end."""
    model, X, exe = built
    dev, client = _serve(exe)
    try:
        yield client, dev, model, X
    finally:
        client.close()
        dev.stop()


@pytest.fixture
def efti(builds):
    """(client, NativeDevice) of the EFTI model: the error and robustness tests."""
    _, _, exe = builds("efti-veh")
    dev, client = _serve(exe, timeout=2.0)
    try:
        yield client, dev
    finally:
        client.close()
        dev.stop()


def _expected(model, rows):
    return predict_model_q15(quantize_model(model), model.n_classes, np.asarray(rows, dtype=np.int64))


# ---------------------------------------------------------------------- real models
def test_info_identifies_the_model(device):
    client, _, model, _ = device
    info = client.info()
    assert info.model_hash == model.hash()
    assert (info.protocol_version, info.n_features, info.n_classes) == (1, model.n_features, model.n_classes)
    assert (info.target, info.treegen_version, info.variant) == ("native", treegen.__version__, "q15-table-scalar")
    assert info.max_payload == 4096 and info.max_batch == (4096 - 2) // (2 * model.n_features)
    assert info.capabilities == CAP_PREDICT | CAP_BENCH | CAP_RAW and info.counter_unit_name == "nanoseconds"


def test_predict_equals_the_python_fixed_point_model(device):
    client, _, model, X = device
    rng = np.random.default_rng(7)
    Xq = model.scaling.to_q15(X)
    rows = np.vstack([Xq, rng.integers(0, 32768, size=(3000, model.n_features)),
                      np.zeros((1, model.n_features), dtype=np.int64), np.full((1, model.n_features), 32767)])
    got = client.predict(rows)
    assert np.array_equal(got, _expected(model, rows))
    assert np.array_equal(got[:len(Xq)], model.predict_index(X))     # quantisation is exact for these trees
    assert client.predict(np.zeros((0, model.n_features))).shape == (0,)


def test_bench_returns_sane_numbers(device):
    client, _, model, X = device
    row = model.scaling.to_q15(X[:1])
    expected_class = int(_expected(model, row)[0])
    for n_iter in (1, 1000, 65535):
        res = client.bench(row, n_iter)
        assert res.n_iter == n_iter and res.unit_name == "nanoseconds" and res.cls == expected_class
        assert 0 < res.per_call < 1e6, res           # < 1 ms per call, even under ASan


def test_device_exits_cleanly_when_the_client_closes(device):
    client, dev, _, _ = device
    client.ping(b"bye")
    client.close()
    assert dev.proc.wait(timeout=5) == 0


# ---------------------------------------------------------------------- error frames
def test_bad_crc_gives_error_frame(efti):
    client, _ = efti
    frame = bytearray(encode_frame(MsgType.PING, 77, b"hello"))
    frame[-1] ^= 0x40
    assert error_fields(raw_response(client, bytes(frame), 2.0)) == (ErrorCode.BAD_CRC, MsgType.PING, 77)
    assert client.ping(b"still here") == b"still here"


@pytest.mark.parametrize("type_", [0x00, 0x05, 0x7E, 0x81, 0x83, 0xFF])
def test_unknown_type_gives_error_frame(efti, type_):
    client, _ = efti
    with pytest.raises(DeviceError, match="UNKNOWN_TYPE") as exc:
        client.request(type_, b"abc")
    assert exc.value.request_type == type_ and "\n" not in str(exc.value)
    assert client.ping(b"x") == b"x"


@pytest.mark.parametrize("length", [4097, 0xFFFF])
def test_oversize_length_is_answered_at_once(efti, length):
    client, _ = efti
    header = bytes([0xA5, 0x5A]) + struct.pack("<H", length) + bytes([MsgType.PREDICT, 9])
    # no payload is ever sent: a device waiting for the announced bytes would not answer at all
    assert error_fields(raw_response(client, header, 2.0)) == (ErrorCode.BAD_LENGTH, MsgType.PREDICT, 9)
    assert client.ping(b"next") == b"next"


def test_bad_payloads_give_error_frames(efti):
    client, _ = efti
    info = client.info()
    nf = info.n_features
    row = struct.pack(f"<{nf}h", *([100] * nf))
    bad = {
        "INFO with a payload": (MsgType.INFO, b"x"),
        "PREDICT without n_rows": (MsgType.PREDICT, b""),
        "PREDICT with 1 byte": (MsgType.PREDICT, b"\x01"),
        "PREDICT n_rows 2, one row": (MsgType.PREDICT, struct.pack("<H", 2) + row),
        "PREDICT one row, one byte short": (MsgType.PREDICT, struct.pack("<H", 1) + row[:-1]),
        "PREDICT one row, a trailing byte": (MsgType.PREDICT, struct.pack("<H", 1) + row + b"\x00"),
        "PREDICT 0 rows with a row": (MsgType.PREDICT, struct.pack("<H", 0) + row),
        "PREDICT n_rows > max_batch": (MsgType.PREDICT, struct.pack("<H", info.max_batch + 1) + row),
        "PREDICT negative feature": (MsgType.PREDICT, struct.pack("<H", 1) + struct.pack(f"<{nf}h", -1, *([0] * (nf - 1)))),
        "BENCH n_iter 0": (MsgType.BENCH, struct.pack("<H", 0) + row),
        "BENCH no row": (MsgType.BENCH, struct.pack("<H", 5)),
        "BENCH two rows": (MsgType.BENCH, struct.pack("<H", 5) + row + row),
        "BENCH negative feature": (MsgType.BENCH, struct.pack("<H", 5) + struct.pack(f"<{nf}h", *([0] * (nf - 1)), -32768)),
    }
    for what, (type_, payload) in bad.items():
        with pytest.raises(DeviceError, match="BAD_PAYLOAD") as exc:
            client.request(type_, payload)
        assert exc.value.request_type == type_, what
    assert client.predict(np.full((2, nf), 100)).shape == (2,)     # still answering


def test_resync_after_random_garbage(efti):
    client, _ = efti
    rng = np.random.default_rng(11)
    max_payload = client.info().max_payload
    for k in range(20):
        garbage = rng.integers(0, 256, int(rng.integers(1, 2 * max_payload)), dtype=np.uint8).tobytes()
        if k % 4 == 0:   # with SYNC at the end: the device is left inside a frame
            garbage += bytes([0xA5, 0x5A]) + struct.pack("<H", int(rng.integers(0, max_payload)))
        client.port.write(garbage)
        client.flush_device()               # max_payload + 8 zeros, discard the device's error answers
        payload = rng.integers(0, 256, int(rng.integers(0, 64)), dtype=np.uint8).tobytes()
        assert client.ping(payload) == payload
    # garbage that holds no SYNC0 needs no flush
    garbage = bytes(b for b in rng.integers(0, 256, 3000, dtype=np.uint8).tobytes() if b != 0xA5)
    client.port.write(garbage)
    assert client.ping(b"direct") == b"direct"


def test_timeout_after_a_half_frame_then_recovery(efti):
    client, _ = efti
    client.info()
    client.port.write(bytes([0xA5, 0x5A]) + struct.pack("<H", 300) + b"\x01\x01")  # awaits 302 more bytes
    with pytest.raises(DeviceTimeout) as exc:
        client.ping(b"lost", timeout=0.5)
    msg = str(exc.value)
    assert "\n" not in msg and "no response to PING" in msg and "0x81" in msg and "received nothing" in msg
    assert client.ping(b"recovered") == b"recovered"      # the client's zero flush resynchronised the device


def test_stale_response_is_a_protocol_error(efti):
    client, _ = efti
    client.port.write(encode_frame(MsgType.PING, 200, b"stale"))     # answered, never read
    time.sleep(0.1)
    with pytest.raises(ProtocolError, match="wrong SEQ 200") as exc:
        client.ping(b"fresh")
    assert "\n" not in str(exc.value)
    client.flush_device()
    assert client.ping(b"fresh") == b"fresh"


def test_killing_the_device_mid_request_is_link_lost(efti):
    client, dev = efti
    client.info()
    client.port.write(bytes([0xA5, 0x5A]) + struct.pack("<H", 100) + b"\x03\x05" + bytes(10))  # half a PREDICT
    killer = threading.Timer(0.3, dev.kill)
    killer.start()
    try:
        # the death is noticed (LinkLost), not waited out (DeviceTimeout after 5 s): no clock needed
        with pytest.raises(LinkLost) as exc:
            client.ping(b"anyone?", timeout=5.0)
    finally:
        killer.join()
    assert "\n" not in str(exc.value)
    with pytest.raises(LinkLost) as exc:
        client.ping(b"again")
    assert "\n" not in str(exc.value) and "link lost" in str(exc.value)


# ---------------------------------------------------------------------- NativeDevice
def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fake_device"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.mark.parametrize("body, match", [
    ("echo 'boom: no pty' >&2; exit 3", "exited with status 3 before announcing its port: boom: no pty"),
    ("echo hello", "printed 'hello', expected 'TG_PORT <path>'"),
    ("sleep 30", "did not announce its port within 0.5 s"),
])
def test_native_device_start_failures_are_one_line(tmp_path, body, match):
    dev = NativeDevice(_script(tmp_path, body), start_timeout=0.5)
    with pytest.raises(TreegenError, match=match) as exc:      # the message names the path taken
        with dev:
            pass
    assert "\n" not in str(exc.value)
    assert dev.proc.poll() is not None               # never left running


def test_native_device_is_killed_even_when_the_body_fails(tmp_path):
    dev = NativeDevice(_script(tmp_path, "echo TG_PORT /dev/null; sleep 30"), grace=0.1)
    with pytest.raises(RuntimeError):
        with dev as port:
            assert port == "/dev/null"
            raise RuntimeError("test body failed")
    assert dev.proc.poll() is not None and dev.killed


def test_native_device_reports_a_non_zero_exit_of_its_own(tmp_path):
    dev = NativeDevice(_script(tmp_path, "echo TG_PORT /dev/null; echo 'SUMMARY: AddressSanitizer: boom' >&2; exit 1"))
    with pytest.raises(TreegenError, match="exited with status 1: SUMMARY: AddressSanitizer: boom"):
        with dev:
            dev.proc.wait(timeout=5)


def test_native_device_missing_executable(tmp_path):
    with pytest.raises(TreegenError, match="not found"):
        NativeDevice(tmp_path / "nope").start()


# ---------------------------------------------------------------------- stub model: u16 classes, counter wrap
STUB_H = """#ifndef TG_STUB_H
#define TG_STUB_H
#include <stdint.h>
#define TG_STUB_N_FEATURES 3
#define TG_STUB_N_CLASSES 300
int tg_stub_predict_q15(const int16_t *x);
#endif
"""
# every call advances a fake counter by 100 ticks; tg_port_counter() returns it modulo 2^TG_COUNTER_BITS
STUB_C = """#include "stub.h"
#include "tg_port.h"
static uint32_t tg_stub_ticks;
int tg_stub_predict_q15(const int16_t *x)
{
    tg_stub_ticks += 100u;
    return (int)(((uint32_t)x[0] + 7u * (uint32_t)x[1] + 13u * (uint32_t)x[2]) % 300u);
}
uint32_t tg_port_counter(void)
{
    return tg_stub_ticks & TG_COUNTER_MASK;
}
"""
STUB_HASH = bytes(range(100, 132)).hex()


@pytest.fixture(scope="module")
def stub_exe(tmp_path_factory):
    out = tmp_path_factory.mktemp("stub")
    files = render_harness(out, name="stub", n_features=3, n_classes=300, model_hash=STUB_HASH, target="native",
                           variant="stub-v1", max_payload=96, port={"counter_bits": 12})
    (out / "stub.h").write_text(STUB_H)
    (out / "stub.c").write_text(STUB_C)
    assert "#define TG_COUNTER_BITS 12" in (out / "tg_port.h").read_text()
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no host C compiler"
    objs = []
    for src in [f for f in files if f.suffix == ".c"] + [out / "stub.c"]:
        extra = ["-Dtg_port_counter=tg_port_counter_clock"] if src.name == "tg_port_native_pty.c" else []
        obj = out / (src.stem + ".o")
        proc = subprocess.run([cc, "-O2", *STRICT_CFLAGS, *SANITIZE_CFLAGS, *extra, "-I", str(out), "-c", str(src),
                               "-o", str(obj)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{src.name}: {proc.stderr}"
        objs.append(str(obj))
    exe = out / "stub_device"
    proc = subprocess.run([cc, *SANITIZE_CFLAGS, "-o", str(exe), *objs], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return exe


@pytest.fixture
def stub(stub_exe):
    dev, client = _serve(stub_exe, timeout=2.0)
    try:
        yield client
    finally:
        client.close()
        dev.stop()


def _stub_classes(rows):
    rows = np.asarray(rows, dtype=np.int64)
    return (rows[:, 0] + 7 * rows[:, 1] + 13 * rows[:, 2]) % 300


def test_stub_info_small_payload_and_u16_classes(stub):
    info = stub.info()
    assert (info.n_features, info.n_classes, info.max_payload, info.variant) == (3, 300, 96, "stub-v1")
    assert info.class_bytes == 2 and info.max_batch == (96 - 2) // 6 and info.model_hash == STUB_HASH
    rows = np.random.default_rng(5).integers(0, 32768, size=(500, 3))
    got = stub.predict(rows)                       # 32 requests of <= 15 rows
    assert np.array_equal(got, _stub_classes(rows)) and got.max() > 255
    assert stub.ping(bytes(96)) == bytes(96)       # a payload of exactly max_payload
    with pytest.raises(DeviceError, match="BAD_LENGTH"):
        stub.request(MsgType.PING, bytes(97))


@pytest.mark.parametrize("n_iter", [1, 2, 5, 40, 41, 1000, 65535])
def test_bench_handles_counter_wrap_exactly(stub, n_iter):
    # a 12-bit counter wraps every 4096 ticks = 41 calls: chunked timing still counts every tick
    res = stub.bench([1, 2, 3], n_iter)
    assert res.total == 100 * n_iter and res.n_iter == n_iter and res.cls == (1 + 14 + 39) % 300


# ---------------------------------------------------------------------- generation, cross-compilation, errors
def test_write_harness_files_and_errors(models, tmp_path):
    model, _ = models["efti-veh"]
    files = write_harness(model, tmp_path / "src", target="native", name="veh")
    assert [f.name for f in files] == ["veh.h", "veh.c", "tg_protocol.h", "tg_protocol.c", "tg_port.h",
                                       "tg_port_native_pty.c", "tg_model_glue.h", "tg_harness.c"]
    assert not (tmp_path / "src" / "main.c").exists()
    for f in files[2:]:
        text = f.read_text()
        assert "do not edit" in text and treegen.__version__ in text, f.name
    assert model.hash() in (tmp_path / "src" / "tg_model_glue.h").read_text()
    with pytest.raises(TreegenError, match="no 'uart' key"):
        write_harness(model, tmp_path / "x", target="cortex-m4")
    with pytest.raises(TreegenError, match="max_payload 40 is too small"):
        write_harness(model, tmp_path / "x", target="native", max_payload=40)
    with pytest.raises(TreegenError, match="collides"):
        write_harness(model, tmp_path / "x", target="native", name="tg_harness")


def test_build_failure_is_one_line(models, tmp_path):
    model, _ = models["efti-veh"]
    with pytest.raises(TreegenError, match=r"native harness build failed \(false exit 1\)") as exc:
        build_native(model, tmp_path, cc="false")
    assert "\n" not in str(exc.value) and (tmp_path / "build.log").is_file()
    assert not (tmp_path / NATIVE_EXECUTABLE).exists()


@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0plus"])
def test_target_agnostic_harness_files_cross_compile_strictly(models, tmp_path, cpu):
    arm = shutil.which("arm-none-eabi-gcc")
    assert arm, "arm-none-eabi-gcc not found (scripts/setup.sh installs it)"
    for key in ("efti-veh", "cart-seg"):
        model, _ = models[key]
        src = tmp_path / key
        write_harness(model, src, target="native")
        for name in ("tg_protocol.c", "tg_harness.c", "model.c"):
            proc = subprocess.run([arm, *ARM_STRICT, f"-mcpu={cpu}", "-I", str(src), "-c", str(src / name),
                                   "-o", str(tmp_path / "x.o")], capture_output=True, text=True)
            assert proc.returncode == 0, f"{key} {name}: {proc.stderr}"


CMSDK_TARGETS = [t.name for t in targets.all_targets() if t.extra.get("uart") == "cmsdk_uart"]


@pytest.mark.parametrize("target_name", CMSDK_TARGETS)
def test_harness_for_emulated_boards_compiles(models, tmp_path, target_name):
    """The harness with the QEMU boards' port (another module's file) compiles with the target's flags."""
    tgt = targets.get(target_name)
    model, _ = models["efti-veh"]
    files = write_harness(model, tmp_path, target=tgt)
    assert "#define TG_COUNTER_BITS 24" in (tmp_path / "tg_port.h").read_text()
    cc = shutil.which(tgt.cc)
    assert cc, f"{tgt.cc} not found"
    for f in files:
        if f.suffix == ".c":
            proc = subprocess.run([cc, *tgt.cflags, *STRICT_CFLAGS, "-I", str(tmp_path), "-c", str(f),
                                   "-o", str(tmp_path / "x.o")], capture_output=True, text=True)
            assert proc.returncode == 0, f"{f.name}: {proc.stderr}"


# ---------------------------------------------------------------------- float32 batches (PREDICT_RAW / PREDICT_F32)
@pytest.fixture(scope="module")
def boosted_device(tmp_path_factory):
    """A LightGBM binary model trained with missing values: its harness serves PREDICT_RAW and
    PREDICT_F32 (a boosted model on an IEEE-754 host)."""
    lgb = pytest.importorskip("lightgbm")
    from treegen.importers import from_lightgbm

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32).astype(np.float64)
    X[rng.random(300) < 0.3, 0] = np.nan
    y = (np.isnan(X[:, 0]) ^ (X[:, 1] > 0.5)).astype(int)
    model = from_lightgbm(lgb.LGBMClassifier(n_estimators=6, num_leaves=6, verbose=-1, n_jobs=1).fit(X, y), X=X)
    exe = build_native(model, tmp_path_factory.mktemp("boosted"), sanitize=True)
    dev, client = _serve(exe)
    try:
        yield client, model
    finally:
        client.close()
        dev.stop(check=True)


@pytest.mark.parametrize("type_", [MsgType.PREDICT_RAW, MsgType.PREDICT_F32])
def test_malformed_float32_batches_give_bad_payload(builds, boosted_device, type_):
    """Short, long (trailing bytes), a row count that does not match the rows sent (0 rows with a row,
    2 rows with one) and too many rows: BAD_PAYLOAD, never a partial answer (issue #32: trailing
    bytes were accepted). PREDICT_RAW: a CART model's float entry; PREDICT_F32: a boosted model's
    float32 export."""
    from treegen.device.protocol import CAP_F32

    dev = None
    if type_ == MsgType.PREDICT_RAW:
        model, X, exe = builds("cart-seg")
        dev, client = _serve(exe)
    else:
        client, model = boosted_device
    try:
        info = client.info()
        assert info.capabilities & (CAP_RAW if type_ == MsgType.PREDICT_RAW else CAP_F32)
        nf = info.n_features
        row = struct.pack(f"<{nf}f", *([0.25] * nf))
        bad = {
            "empty": b"",
            "one byte": b"\x01",
            "one row, one byte short": struct.pack("<H", 1) + row[:-1],
            "one row, one trailing byte": struct.pack("<H", 1) + row + b"\x00",
            "one row, a trailing row": struct.pack("<H", 1) + row + row,
            "0 rows with a row": struct.pack("<H", 0) + row,
            "0 rows, one trailing byte": struct.pack("<H", 0) + b"\x00",
            "2 rows, one sent": struct.pack("<H", 2) + row,
            "n_rows > max_batch": struct.pack("<H", 0xFFFF) + row,
        }
        for what, payload in bad.items():
            with pytest.raises(DeviceError, match="BAD_PAYLOAD") as exc:
                client.request(type_, payload)
            assert exc.value.request_type == type_, what
        # well-formed batches are answered: 0 rows (the protocol allows it) and, PREDICT_F32 of a model
        # that routes missing values, rows with NaN and +-inf cells (raw float32 bit patterns are inputs)
        assert client.request(type_, struct.pack("<H", 0)) == struct.pack("<H", 0)
        if type_ == MsgType.PREDICT_RAW:
            rows = X[:5].astype(np.float32)
            from treegen.device.hil import reference

            assert np.array_equal(client.predict_raw(rows), reference(model, rows.astype(np.float64)).fixed)
        else:
            from treegen.device import hil_f32

            rows = np.array([[np.nan, 0.7, -1.0, 2.0], [np.inf, np.nan, -np.inf, 0.0], [0.1, 0.2, 0.3, 0.4]],
                            dtype=np.float32)
            spec = hil_f32.spec_for(model)
            g_cls, g_val = hil_f32.decode(client.predict_f32(rows, spec["row_bytes"]), spec)
            w_cls, w_val = hil_f32.reference(model, rows, spec)
            assert np.array_equal(g_cls, w_cls) and np.array_equal(g_val.view(np.uint64), w_val.view(np.uint64))
        assert client.ping(b"still here") == b"still here"
    finally:
        if dev is not None:
            client.close()
            dev.stop(check=True)
