"""treegen.hil and ``treegen hil`` on the native target (host compiler, pseudo-terminal): the report,
JUnit XML, exit statuses (0 pass, 1 mismatch, 2 error), one-line errors for a wrong model, a silent
device and a board without a port, and no process left behind after a failure. The same runs on
the emulated boards are in hil/ and tests/device/test_qemu_harness_e2e.py."""

from __future__ import annotations

import json
import os
import socket
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from conftest import DATASETS, load_shared

from treegen import EFTIClassifier, save
from treegen.cli import main
from treegen.core.model import Model
from treegen.device import hil
from treegen.device.firmware import NativeDevice
from treegen.device.protocol import DeviceTimeout

VEH = DATASETS / "veh.csv.gz"
REPORT_KEYS = {"target", "rows", "mismatches", "float_agreement", "rows_per_s", "insn_per_inference",
               "counter_unit", "model_hash", "variant", "flash_bytes", "ram_bytes"}


@pytest.fixture(scope="module")
def model() -> Model:
    X, y = load_shared("veh")
    return EFTIClassifier(max_iter=2000, random_state=1).fit(X, y).model_


@pytest.fixture(scope="module")
def other_model() -> Model:
    X, y = load_shared("veh")
    return EFTIClassifier(max_iter=2000, random_state=2).fit(X, y).model_


@pytest.fixture
def model_file(model, tmp_path) -> Path:
    return save(model, tmp_path / "veh.json")


def children() -> list[int]:
    """PIDs of this process's live (non-zombie) children (compared before/after: other tests may
    leave worker processes, e.g. joblib's)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            out.append(int(entry))
    return out


def run_cli(capsys, *argv):
    rc = main(["hil", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


# ---------------------------------------------------------------------- run_hil
def test_run_hil_native_report(model, tmp_path):
    before = set(children())
    X, y = load_shared("veh")
    report = hil.run_hil(model, "native", data=(X, y), build_dir=tmp_path / "fw", bench_iters=100)
    assert REPORT_KEYS <= set(report)
    assert report["ok"] is True and report["error"] is None
    assert report["rows"] == X.shape[0] and report["mismatches"] == 0 and report["mismatch_rows"] == []
    assert report["model_hash"] == model.hash() and (report["layout"], report["variant"]) == ("table", "scalar")
    assert report["counter_unit"] == "nanoseconds" and report["insn_per_inference"] > 0
    assert 0 <= report["float_agreement"] <= 1 and report["rows_per_s"] > 0
    assert [c["name"] for c in report["checks"]] == ["hash", "predictions", "bench"]
    assert all(c["ok"] for c in report["checks"])
    assert set(children()) <= before                     # the native harness is gone


def test_run_hil_without_data_streams_seeded_random_rows(model, tmp_path):
    report = hil.run_hil(model, "native", build_dir=tmp_path / "fw", bench_iters=10)
    assert report["ok"] and report["rows"] == hil.RANDOM_ROWS


def _walk_q15(qt, x) -> int:
    """One row through a quantised tree, node by node in plain Python integers (child references:
    >= 0 internal node, < 0 leaf ``-ref - 1``)."""
    ref = qt.root
    while ref >= 0:
        if qt.kind == "axis":
            go_left = int(x[qt.feature[ref]]) <= int(qt.threshold[ref])
        else:
            acc = sum(int(a) * int(w) for a, w in zip(x, qt.weights[ref]))
            go_left = acc <= int(qt.threshold[ref])
        ref = int(qt.left[ref] if go_left else qt.right[ref])
    return -ref - 1


def test_reference_matches_the_exporter_quantisation(model):
    X, y = load_shared("veh")
    ref = hil.reference(model, X, y)
    assert ref.X_q15.dtype == np.int64 and ref.X_q15.shape == X.shape
    assert np.array_equal(ref.X_q15, model.scaling.to_q15(X))
    assert np.array_equal(ref.floating, model.predict_index(X))
    assert ref.labels is not None and ref.labels.min() >= 0
    # the fixed-point reference is the exporter's quantised model, computed independently here: the
    # integer node tests evaluated on the Q15 rows (a reference answering anything else fails)
    from treegen.emit.quantize import quantize_model
    fixed = np.empty(X.shape[0], dtype=np.int64)
    for r, x in enumerate(ref.X_q15):
        votes = np.zeros(model.n_classes, dtype=np.int64)
        for qt in quantize_model(model):
            votes[_walk_q15(qt, x)] += 1
        fixed[r] = int(np.argmax(votes))
    assert np.array_equal(ref.fixed, fixed)
    assert len(np.unique(ref.fixed)) == model.n_classes          # not a constant answer
    assert np.mean(ref.fixed == ref.floating) > 0.99


def test_timeout_mid_run_raises_with_partial_report_and_kills_the_device(model, tmp_path, monkeypatch):
    def silent(client, rows, **kw):
        raise DeviceTimeout("dev: no response to PREDICT (seq 2) within 1 s; expected a PREDICT_RESPONSE, "
                            "received 3 byte(s): a5 5a 04", b"\xa5\x5a\x04")

    monkeypatch.setattr(hil, "predict_rows", silent)
    before = set(children())
    X, y = load_shared("veh")
    with pytest.raises(hil.HilError) as exc:
        hil.run_hil(model, "native", data=(X, y), build_dir=tmp_path / "fw")
    report = exc.value.report
    assert "received 3 byte(s): a5 5a 04" in str(exc.value)
    assert report["ok"] is False and report["error"] == str(exc.value)
    assert [c["ok"] for c in report["checks"]] == [True, False, False]
    assert report["checks"][2]["message"].startswith("not run")
    assert set(children()) <= before


def test_junit_and_summary_of_a_failed_report():
    report = hil._new_report(_tiny_model(), hil._target("native"), None)
    hil._set_check(report, "hash", True, 0.1, "ok")
    hil._set_check(report, "predictions", False, 0.2, "3 of 10 device predictions differ <&>")
    report.update(rows=10, mismatches=3)
    xml = hil.junit_xml(report)
    root = ET.fromstring(xml)
    suite = root.find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("skipped") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"hash", "predictions", "bench"}
    assert cases["predictions"].find("failure").get("message") == "3 of 10 device predictions differ <&>"
    assert hil.summary(report).startswith("FAIL: 10 rows, 3 mismatches")


def _tiny_model() -> Model:
    X, y = load_shared("pid")
    from treegen import CARTClassifier

    return CARTClassifier(max_depth=2).fit(X, y).model_


# ---------------------------------------------------------------------- CLI
def test_cli_pass_writes_json_and_junit(model_file, model, tmp_path, capsys):
    j, x = tmp_path / "hil.json", tmp_path / "hil.xml"
    rc, out, err = run_cli(capsys, model_file, "--target", "native", "--data", VEH, "-o", tmp_path / "fw",
                           "--json", j, "--junit", x, "--bench-iters", "100", "-q")
    assert rc == 0, err
    assert "result          PASS" in out and "hash            ok" in out
    report = json.loads(j.read_text())
    assert REPORT_KEYS <= set(report) and report["ok"] is True and report["command"] == "hil"
    assert report["model_hash"] == model.hash() and report["mismatches"] == 0
    suite = ET.parse(x).getroot().find("testsuite")
    assert [c.get("name") for c in suite.iter("testcase")] == ["hash", "predictions", "bench"]
    assert suite.get("failures") == "0" and suite.get("errors") == "0"


def test_cli_mismatch_exits_1_with_one_line_and_a_failed_report(model_file, tmp_path, capsys, monkeypatch):
    real = hil.reference

    def wrong(*a, **kw):        # the host model disagrees with the device on rows 3 and 7
        ref = real(*a, **kw)
        for i in (3, 7):
            ref.fixed[i] = (ref.fixed[i] + 1) % 4
        return ref

    monkeypatch.setattr(hil, "reference", wrong)
    before = set(children())
    j, x = tmp_path / "hil.json", tmp_path / "hil.xml"
    rc, out, err = run_cli(capsys, model_file, "--target", "native", "--data", VEH, "-o", tmp_path / "fw",
                           "--json", j, "--junit", x, "-q")
    assert rc == 1
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("treegen: hil failed: FAIL: 846 rows, 2 mismatches")
    report = json.loads(j.read_text())
    assert report["ok"] is False and report["mismatches"] == 2
    assert [r["row"] for r in report["mismatch_rows"]] == [3, 7]
    assert set(report["mismatch_rows"][0]) >= {"row", "device", "fixed_point", "float", "q15"}
    suite = ET.parse(x).getroot().find("testsuite")
    assert suite.get("failures") == "1"
    assert set(children()) <= before


def test_cli_wrong_model_on_a_running_device(model, other_model, tmp_path, capsys):
    exe = hil.build_firmware(other_model, "native", tmp_path / "fw").path
    model_file = save(model, tmp_path / "veh.json")
    j = tmp_path / "hil.json"
    with NativeDevice(exe) as port:
        rc, out, err = run_cli(capsys, model_file, "--target", "native", "--port", port, "--data", VEH,
                               "--json", j, "-o", tmp_path / "none")
    assert rc == 2
    assert err.strip() == (f"treegen: error: device runs model {other_model.hash()[:16]}, "
                           f"expected {model.hash()[:16]}")
    report = json.loads(j.read_text())
    assert report["ok"] is False and report["error"].startswith("device runs model")


class SilentDevice:
    """A TCP 'device' that accepts one client, optionally sends some bytes, then never answers."""

    def __init__(self, greeting: bytes = b""):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.greeting = greeting
        self.url = f"socket://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            first = True
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                if first and self.greeting:
                    conn.sendall(self.greeting)
                first = False

    def close(self):
        self.sock.close()


def test_cli_timeout_is_one_line_with_the_bytes_received(model_file, tmp_path, capsys):
    dev = SilentDevice(greeting=bytes.fromhex("a55a2000"))     # a frame start, then silence
    j, x = tmp_path / "hil.json", tmp_path / "hil.xml"
    try:
        rc, out, err = run_cli(capsys, model_file, "--target", "native", "--port", dev.url, "--data", VEH,
                               "--timeout", "0.5", "--json", j, "--junit", x, "-o", tmp_path / "none")
    finally:
        dev.close()
    assert rc == 2
    assert len(err.strip().splitlines()) == 1
    assert "no response to INFO" in err and "received 4 byte(s): a5 5a 20 00" in err
    report = json.loads(j.read_text())
    assert report["ok"] is False and "no response to INFO" in report["error"]
    suite = ET.parse(x).getroot().find("testsuite")
    assert suite.get("failures") == "1" and suite.get("errors") == "2"


def test_cli_board_needs_a_port(model_file, tmp_path, capsys):
    rc, out, err = run_cli(capsys, model_file, "--target", "nucleo_f446re", "--data", VEH, "-o", tmp_path / "x")
    assert rc == 2
    assert "nucleo_f446re" in err and "--port" in err and len(err.strip().splitlines()) == 1


def test_cli_unreachable_port_is_one_line(model_file, tmp_path, capsys):
    rc, out, err = run_cli(capsys, model_file, "--target", "nucleo_f446re", "--port", tmp_path / "ttyNONE",
                           "--data", VEH)
    assert rc == 2
    assert err.startswith("treegen: error: cannot open serial port") and len(err.strip().splitlines()) == 1


def test_port_mode_checks_the_requested_layout(model, tmp_path):
    exe = hil.build_firmware(model, "native", tmp_path / "fw", layout="table").path
    with NativeDevice(exe) as port:
        with pytest.raises(hil.HilError) as exc:
            hil.run_hil(model, "native", port=port, layout="unrolled", bench_iters=0)
    assert str(exc.value) == "device runs layout 'table', variant 'scalar', expected layout 'unrolled'"
