"""The board farm (issue 37) on a real labgrid: ``labgrid-coordinator``, two ``labgrid-exporter`` "hosts" and
places on 127.0.0.1 (:mod:`treegen.device.farm_lab`): three emulated boards exported as NetworkSerialPort
(QEMU's UART socket) and the native harness behind ser2net (RawSerialPort, RFC 2217).

- 3 models x 4 places, in parallel: every cell PASS, each cell's report equal to ``treegen hil --port``
  on the same image started here;
- a place held by another user: ``--place-timeout`` waits (progress), then one line naming the holder;
  released during the wait: the run goes on;
- the coordinator gone: one line, exit 2;
- SIGINT mid-matrix: exit 130, ``labgrid-client who`` shows no place held, no QEMU left;
- an exporter SIGKILLed mid-matrix: its cells run again on the other host's places, each cell once,
  the report and the JUnit XML say which.

Needs labgrid (the farm extra), ser2net, QEMU and the cross compilers: FAILS (never skips) without them.
Small models (CART depth 2-4 on bcw), 120 rows per cell; about a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import DATASETS, REPO

from treegen import save
from treegen.cli import main
from treegen.core.model import Model, load
from treegen.device import hil
from treegen.device.emulator import QemuBoard, free_port
from treegen.device.farm_lab import EmulatedLab, specs
from treegen.device.firmware import NativeDevice

pytestmark = pytest.mark.hil

BCW = DATASETS / "bcw.csv.gz"
FOUR = ["qemu-m4@hostA", "qemu-netduinoplus2@hostA", "qemu-hifive1@hostB", "native@hostB"]
#: report fields a farm cell must share with the same HIL run at --port
SAME = ("rows", "mismatches", "accuracy", "float_agreement", "model_hash", "counter_unit")


def _need_tools():
    missing = [t for t in ("labgrid-coordinator", "labgrid-exporter", "labgrid-client", "qemu-system-arm",
                           "qemu-system-riscv32", "arm-none-eabi-gcc", "riscv64-unknown-elf-gcc")
               if shutil.which(t) is None]
    if shutil.which("ser2net") is None and not os.path.isfile("/usr/sbin/ser2net"):
        missing.append("ser2net")
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: pip install '.[farm]' and bash scripts/setup.sh", pytrace=False)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    _need_tools()
    return tmp_path_factory.mktemp("farm")


@pytest.fixture(scope="module")
def models(work) -> list[Path]:
    import gzip

    lines = gzip.open(BCW, "rt").read().splitlines()
    (work / "rows.csv").write_text("\n".join(lines[:121]) + "\n")
    (work / "big.csv").write_text("\n".join([lines[0]] + lines[1:] * 2) + "\n")
    # for the tests that interrupt a run: long enough (about 20 s a cell) that no run ends before its signal
    (work / "huge.csv").write_text("\n".join([lines[0]] + lines[1:] * 20) + "\n")
    (work / "long.csv").write_text("\n".join([lines[0]] + lines[1:] * 6) + "\n")     # about 6 s a cell
    out = []
    for depth in (2, 3, 4):
        path = work / f"d{depth}.json"
        assert main(["fit", str(BCW), "--algo", "cart", "--max-depth", str(depth), "-q", "-o", str(path)]) == 0
        out.append(path)
    return out


@pytest.fixture(scope="module")
def lab(work):
    with EmulatedLab(work / "lab", specs(FOUR)) as lab:
        yield lab


def farm_argv(lab, models, data, *extra):
    return ["farm", *map(str, models), "--data", str(data), "--coordinator", lab.address,
            "--bench-iters", "100", *map(str, extra)]


def who(address: str) -> str:
    return subprocess.run(["labgrid-client", "-x", address, "who"], capture_output=True, text=True,
                          timeout=60).stdout


def _port_report(model: Model, target: str, fw, data: Path, tmp: Path) -> dict:
    """``treegen hil MODEL --target T --port URL --data D --json`` on ``fw`` started here."""
    from treegen.device.farm_board import boot
    from treegen.device.hil import drain_quiet
    from treegen.device.protocol import DeviceClient

    out = tmp / f"port-{target}-{model.hash()[:8]}.json"
    mfile = save(model, tmp / f"port-{model.hash()[:8]}.json")
    argv = ["hil", str(mfile), "--target", target, "--data", str(data), "--bench-iters", "100", "--json", str(out),
            "-q"]
    if target == "native":
        dev = NativeDevice(fw.path)
        port = dev.start()
        try:
            assert main([*argv, "--port", port]) == 0
        finally:
            dev.kill()
            dev.stop(check=False)
    else:
        with QemuBoard(target, fw.path) as board:
            client = DeviceClient.open(board.url, timeout=5.0)     # booted as a place's board is (farm_board)
            client.drain_quiet = drain_quiet(target)
            try:
                boot(client)
            finally:
                client.close()
            assert main([*argv, "--port", board.url]) == 0
    return json.loads(out.read_text())


# ---------------------------------------------------------------------- the matrix
def test_matrix_three_models_four_places_identical_to_port(lab, models, work, capsys):
    report_file, junit = work / "m.json", work / "m.xml"
    rc = main(farm_argv(lab, models, work / "rows.csv", "-o", work / "builds", "--json", report_file,
                        "--junit", junit))
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    report = json.loads(report_file.read_text())
    cells = report["cells"]
    assert len(cells) == 12 and report["passed"] == 12 and report["ok"] is True
    assert {(Path(c["model"]).name, c["target"]) for c in cells} == \
        {(m.name, t) for m in models for t in ("qemu-m4", "qemu-netduinoplus2", "qemu-hifive1", "native")}
    assert {c["place"] for c in cells} == {"qemu-m4-1", "qemu-netduinoplus2-1", "qemu-hifive1-1", "native-1"}
    assert {c["exporter"] for c in cells} == {"hostA", "hostB"}
    assert all(c["result"] == "PASS" and not c["retried"] and c["mismatches"] == 0 for c in cells)
    assert "12 of 12 cells PASS, 0 FAIL, 0 ERROR, 0 retried" in out
    # the cells ran at the same time: the four places were busy at once
    assert "running" in err or "[0/12] start" in err
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert len(cases) == 12 and not ET.parse(junit).getroot().findall(".//failure")
    assert who(lab.address).count("\n") <= 1, "a place is still held"
    # each cell equals the same HIL run with --port on the same image
    for c in cells:
        model = load(c["model"])
        fw = hil.build_firmware(model, c["target"], work / "builds" / f"{Path(c['model']).stem}-{c['target']}")
        ref = _port_report(model, c["target"], fw, work / "rows.csv", work)
        assert ref["ok"] is True
        for key in SAME:
            assert c[key] == ref[key], (c["model"], c["target"], key)
        assert [(k["name"], k["ok"]) for k in c["checks"]] == [(k["name"], k["ok"]) for k in ref["checks"]]
        if c["target"] != "native":   # per-call counts: the firmware's calibration moves them by ~0.3 % run to run
            assert c["insn_per_inference"] == pytest.approx(ref["insn_per_inference"], rel=0.02)


def test_hil_place_single(lab, models, work, capsys):
    rc = main(["hil", str(models[0]), "--target", "qemu-netduinoplus2", "--place", "qemu-netduinoplus2-1",
               "--coordinator", lab.address, "--data", str(work / "rows.csv"), "-o", str(work / "single"),
               "--bench-iters", "100", "-q"])
    out, _ = capsys.readouterr()
    assert rc == 0, out
    assert "place           qemu-netduinoplus2-1  (acquired by" in out and "result          PASS" in out
    assert "hostA/qemu-netduinoplus2-1/NetworkSerialPort" in out
    assert who(lab.address).count("\n") <= 1


def test_lab_started_by_up_keeps_its_ports_reserved_until_down(tmp_path):
    """`farm_lab up` returns at once: the ports its coordinator and boards use stay reserved (the lab's
    processes hold the lock files) until `down`, so a lab a parallel worker starts meanwhile cannot publish
    one of them (seen: docs/guide/board-farm.md's lab and this file's both on port 23804, the place's QEMU
    'Address already in use'). Planted bug: _spawn without pass_fds -> the ports are free once up returns."""
    from treegen.device import farm_lab

    _need_tools()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    root = tmp_path / "lab"
    lab_cmd = [sys.executable, "-m", "treegen.device.farm_lab"]
    up = subprocess.run([*lab_cmd, "up", str(root), "qemu-m4@hostA", "qemu-hifive1@hostB"], env=env,
                        capture_output=True, text=True, timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        ports = [int((root / "coordinator").read_text().strip().rsplit(":", 1)[1])]
        for cfg in sorted(root.glob("exporter-*.yaml")):
            ports += [int(p) for p in re.findall(r"port: (\d+)", cfg.read_text())]
        assert len(ports) == 3
        assert [p for p in ports if farm_lab._reserve(p)] == [], "ports of a running lab not reserved"
    finally:
        down = subprocess.run([*lab_cmd, "down", str(root)], env=env, capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    deadline = time.monotonic() + 10
    free = []
    while time.monotonic() < deadline and len(free) < len(ports):
        free += [p for p in ports if p not in free and farm_lab._reserve(p)]
        time.sleep(0.1)
    for p in free:                                       # this process's locks: given back
        os.close(farm_lab._PORT_LOCKS.pop(p))
    assert sorted(free) == sorted(ports), "the ports of a stopped lab are still reserved"


# ---------------------------------------------------------------------- faults
def test_place_held_by_another_user_waits_then_one_line(lab, models, work, capsys):
    env = {**os.environ, "LG_USERNAME": "alice", "LG_COORDINATOR": lab.address}
    subprocess.run(["labgrid-client", "-p", "qemu-m4-1", "acquire"], env=env, check=True, capture_output=True,
                   timeout=60)
    try:
        argv = ["hil", str(models[0]), "--target", "qemu-m4", "--place", "qemu-m4-1", "--coordinator", lab.address,
                "--data", str(work / "rows.csv"), "-o", str(work / "held"), "--bench-iters", "100"]
        t0 = time.monotonic()
        rc = main([*argv, "--place-timeout", "2"])
        waited = time.monotonic() - t0
        out, err = capsys.readouterr()
        assert rc == 2 and waited >= 2
        assert "place qemu-m4-1 is held by" in err and "/alice: waiting (0 of 2 s)" in err
        last = err.strip().splitlines()[-1]
        assert last.startswith("treegen: error: place qemu-m4-1 is held by ") and last.endswith(
            "/alice; waited 2 s (--place-timeout)"), err
        assert "Traceback" not in err and "result" not in out
        # released by alice while treegen waits: the run goes on
        timer = threading.Timer(1.5, lambda: subprocess.run(["labgrid-client", "-p", "qemu-m4-1", "release"], env=env,
                                                            capture_output=True, timeout=60))
        timer.start()
        rc = main([*argv, "--place-timeout", "60", "-q"])
        timer.join()
        out, err = capsys.readouterr()
        assert rc == 0 and "result          PASS" in out, out + err
    finally:
        subprocess.run(["labgrid-client", "-p", "qemu-m4-1", "release"], env=env, capture_output=True, timeout=60)
    assert who(lab.address).count("\n") <= 1


def test_coordinator_gone_one_line(models, work, capsys):
    address = f"127.0.0.1:{free_port()}"
    rc = main(["hil", str(models[0]), "--target", "qemu-m4", "--place", "qemu-m4-1", "--coordinator", address,
               "--data", str(work / "rows.csv"), "-o", str(work / "gone")])
    _, err = capsys.readouterr()
    assert rc == 2
    assert err.strip().splitlines() == [f"treegen: error: cannot reach the labgrid coordinator at {address}: "
                                        "Could not connect to coordinator"]
    rc = main(farm_argv(type("L", (), {"address": address}), models, work / "rows.csv", "-o", work / "gone"))
    _, err = capsys.readouterr()
    assert rc == 2 and err.startswith(f"treegen: error: cannot reach the labgrid coordinator at {address}")


def _start_farm(argv, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "treegen", *map(str, argv)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _qemu_running(folder: Path) -> list[int]:
    """QEMU processes running an image of ``folder``."""
    from treegen.device.farm_lab import _pids_with

    return [p for p in _pids_with(str(folder)) if "qemu-system" in Path(f"/proc/{p}/cmdline").read_text("latin-1")]


def test_interrupt_releases_every_place(lab, models, work):
    proc = _start_farm(farm_argv(lab, models, work / "huge.csv", "-o", work / "builds"), work)
    started = 0
    lines = []
    for line in proc.stderr:
        lines.append(line)
        started += " start " in line
        if started >= 3:
            break
    time.sleep(0.3)
    held = who(lab.address)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(lines) + err
    assert "treegen: interrupted" in err and "Traceback" not in err
    assert held.count("\n") >= 2                     # places were held while it ran ...
    assert who(lab.address).count("\n") <= 1         # ... and none after Ctrl-C
    assert not _qemu_running(work / "builds")


def test_exporter_killed_mid_matrix_cells_retried_elsewhere(models, work):
    places = specs(["qemu-m4@hostA", "native@hostA", "qemu-m4@hostB", "native@hostB"])
    with EmulatedLab(work / "lab2", places) as lab2:
        report_file, junit = work / "k.json", work / "k.xml"
        proc = _start_farm(farm_argv(lab2, models, work / "long.csv", "-o", work / "builds", "--json", report_file,
                                     "--junit", junit), work)
        log = []
        for line in proc.stderr:
            log.append(line)
            if " start " in line and ("on qemu-m4-1" in line or "on native-1" in line):
                time.sleep(0.3)
                lab2.kill_exporter("hostA")
                break
        out, err = proc.communicate(timeout=300)
        log.append(err)
        assert proc.returncode == 0, out + "".join(log)
        report = json.loads(report_file.read_text())
        cells = report["cells"]
        keys = [(Path(c["model"]).name, c["target"]) for c in cells]
        assert len(cells) == 6 and len(set(keys)) == 6                       # none lost, none twice
        assert all(c["result"] == "PASS" for c in cells)
        retried = [c for c in cells if c["retried"]]
        assert retried, "no cell was running on hostA when it died"
        for c in retried:
            first, last = c["attempts"][0], c["attempts"][-1]
            assert len(c["attempts"]) == 2 and first["exporter"] == "hostA" and first["result"] == "LOST"
            assert "exporter hostA" in first["error"] and "went away" in first["error"]
            assert last["exporter"] == "hostB" and last["result"] == "PASS" and c["place"] == last["place"]
        assert all(c["exporter"] == "hostB" for c in cells if c["retried"])
        assert {p["name"] for p in report["places"] if p["lost_exporter"]} <= {"qemu-m4-1", "native-1"}
        assert f"{len(retried)} retried" in out and "retried: " in out
        root = ET.parse(junit).getroot()
        assert len(root.findall(".//testcase")) == 6
        assert sum("LOST" in (so.text or "") for so in root.iter("system-out")) == len(retried)
        assert who(lab2.address).count("\n") <= 1


# ---------------------------------------------------------------------- the pytest plugin
def test_plugin_treegen_place_as_treegen_port(lab, models, work):
    """``pytest --pyargs treegen.hil.test_device --treegen-place native-1``: the plugin acquires the place,
    its board (the native harness behind ser2net) runs the session's firmware, the checks pass, and the
    place is free afterwards; a place that does not exist fails (never skips) in one line."""
    base = ["-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "treegen.hil.test_device", "-q",
            "--treegen-target", "native", "--treegen-coordinator", lab.address, "--treegen-model", str(models[1]),
            "--treegen-data", str(work / "rows.csv")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, *base, "--treegen-place", "native-1"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout + proc.stderr
    assert who(lab.address).count("\n") <= 1
    proc = subprocess.run([sys.executable, *base, "--treegen-place", "no-such-place"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "skipped" not in proc.stdout
    assert "--treegen-place no-such-place: no place 'no-such-place' at the labgrid coordinator" in proc.stdout


def test_sigterm_during_hil_place_releases_it(lab, models, work):
    """SIGTERM while ``treegen hil --place`` runs: exit 143, the place released, its QEMU stopped."""
    argv = ["hil", models[2], "--target", "qemu-m4", "--place", "qemu-m4-1", "--coordinator", lab.address,
            "--data", work / "huge.csv", "-o", work / "builds-sigterm", "--bench-iters", "20000", "-q"]
    # a folder of its own: the module's earlier tests built d4 for qemu-m4, and a reused firmware made the
    # run end before the signal (exit 0, or -15 once the handlers were restored at exit)
    proc = _start_farm(argv, work)
    for line in proc.stdout:
        if line.startswith("place "):
            break
    time.sleep(0.5)
    held = who(lab.address)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, out + err
    assert "qemu-m4-1" in held and who(lab.address).count("\n") <= 1
    assert err.strip().splitlines()[-1] == "treegen: interrupted by SIGTERM"
    assert not _qemu_running(work / "builds-sigterm")


def test_coordinator_killed_mid_matrix_one_line_exit_2(models, work):
    """The coordinator SIGKILLed while cells run: every cell ERROR (none PASS on a farm nobody coordinates),
    the report written, one line at the end, exit 2."""
    with EmulatedLab(work / "lab3", specs(["qemu-m4@hostA", "native@hostB"])) as lab3:
        report_file = work / "c.json"
        proc = _start_farm(farm_argv(lab3, models[:2], work / "huge.csv", "-o", work / "builds-lost", "--json",
                                     report_file), work)     # fresh builds: reused ones finished before the kill
        for line in proc.stderr:
            if " start " in line:
                time.sleep(0.3)
                os.kill(lab3.pids["coordinator"], signal.SIGKILL)
                break
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, out + err
        assert err.strip().splitlines()[-1] == (f"treegen: error: lost the labgrid coordinator at {lab3.address} "
                                                "during the matrix: 4 of 4 cells did not pass")
        report = json.loads(report_file.read_text())
        assert report["coordinator_lost"] is True and len(report["cells"]) == 4
        assert all(c["result"] == "ERROR" and "lost the labgrid coordinator" in c["error"] for c in report["cells"]), \
            [(c["result"], c["error"], c["attempts"]) for c in report["cells"]]
    assert not _qemu_running(work / "builds-lost")
