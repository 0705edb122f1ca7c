"""``treegen flash --target <real board>`` without the board's PlatformIO platform and without a
reachable registry: one line saying so and what to do, exit 2, within seconds -- instead of
PlatformIO's ~60 s wait and a bare ``HTTPClientError:``. The registry is simulated deterministically
(``TREEGEN_PIO_REGISTRY`` pointing at a closed or a listening local port; an empty or a prepared
``PLATFORMIO_CORE_DIR``); PlatformIO itself is never started (``processes.run`` is replaced)."""

from __future__ import annotations

import json
import socket
import time

import pytest
from conftest import run_cli

from treegen import CARTClassifier, save
from treegen.device import platformio as tpio
from treegen.device import processes


@pytest.fixture()
def model_file(tmp_path):
    X = [[0, 0], [1, 1], [2, 0], [3, 1]] * 5
    y = [0, 0, 1, 1] * 5
    path = tmp_path / "m.json"
    save(CARTClassifier(max_depth=2).fit(X, y).model_, path)
    return path


@pytest.fixture()
def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]           # nothing listens there once the socket is closed


@pytest.fixture()
def uploads(monkeypatch):
    calls = []

    def fake_run(cmd, **kw):
        calls.append(list(cmd))
        return 0
    monkeypatch.setattr(processes, "run", fake_run)
    return calls


def _core_dir(tmp_path, monkeypatch, platforms=()):
    core = tmp_path / "pio-core"
    for name, version in platforms:
        d = core / "platforms" / name
        d.mkdir(parents=True)
        (d / "platform.json").write_text(json.dumps({"name": name, "version": version}))
    core.mkdir(exist_ok=True)
    monkeypatch.setenv("PLATFORMIO_CORE_DIR", str(core))


def test_unreachable_registry_is_one_line_in_seconds(model_file, tmp_path, monkeypatch, capsys, closed_port,
                                                     uploads):
    _core_dir(tmp_path, monkeypatch)
    monkeypatch.setenv(tpio.REGISTRY_ENV, f"127.0.0.1:{closed_port}")
    t0 = time.perf_counter()
    code, out, err = run_cli(capsys, ["flash", model_file, "--target", "nucleo_f446re", "-o", tmp_path / "p",
                                      "--framework", "arduino"])
    seconds = time.perf_counter() - t0
    assert code == 2 and seconds < 10, (code, seconds)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("treegen: error: the PlatformIO platform ststm32@~19.6.0 for nucleo_f446re is not "
                           f"installed and the PlatformIO registry (127.0.0.1:{closed_port}) cannot be reached")
    assert "pio pkg install -g -p \"ststm32@~19.6.0\"" in line and "--target qemu-netduinoplus2" in line
    assert "HTTPClientError" not in err and out == ""
    assert uploads == []                                     # PlatformIO was never started
    assert (tmp_path / "p" / "platformio.ini").is_file()     # the project is there to build once online


def test_teensy_suggests_an_emulated_cortex_m7(model_file, tmp_path, monkeypatch, capsys, closed_port, uploads):
    _core_dir(tmp_path, monkeypatch)
    monkeypatch.setenv(tpio.REGISTRY_ENV, f"127.0.0.1:{closed_port}")
    code, _, err = run_cli(capsys, ["flash", model_file, "--target", "teensy41", "-o", tmp_path / "p"])
    assert code == 2 and "teensy@~5.2.0" in err and "--target qemu-m7" in err, err
    assert uploads == []


def test_reachable_registry_or_installed_platform_uploads(model_file, tmp_path, monkeypatch, capsys, closed_port,
                                                          uploads):
    # reachable (a local listener stands in for the registry): PlatformIO runs and may fetch the platform
    _core_dir(tmp_path, monkeypatch)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv(tpio.REGISTRY_ENV, f"127.0.0.1:{server.getsockname()[1]}")
        code, out, err = run_cli(capsys, ["flash", model_file, "--target", "nucleo_f446re", "-o", tmp_path / "a",
                                          "--framework", "arduino"])
    assert code == 0, err
    assert len(uploads) == 1 and uploads[0][-2:] == ["-t", "upload"] and "upload" in out
    # installed in a version the pin accepts: no registry needed
    monkeypatch.setenv(tpio.REGISTRY_ENV, f"127.0.0.1:{closed_port}")
    _core_dir(tmp_path / "b", monkeypatch, platforms=[("ststm32", "19.6.3")])
    code, _, err = run_cli(capsys, ["flash", model_file, "--target", "nucleo_f446re", "-o", tmp_path / "b" / "p",
                                      "--framework", "arduino"])
    assert code == 0 and len(uploads) == 2, err
    # installed, but a version outside the pin: PlatformIO would have to download the pinned one
    _core_dir(tmp_path / "c", monkeypatch, platforms=[("ststm32", "17.6.0")])
    code, _, err = run_cli(capsys, ["flash", model_file, "--target", "nucleo_f446re", "-o", tmp_path / "c" / "p",
                                      "--framework", "arduino"])
    assert code == 2 and "is not installed" in err and len(uploads) == 2, err


def test_bad_registry_override_is_a_user_error(model_file, tmp_path, monkeypatch, capsys, uploads):
    _core_dir(tmp_path, monkeypatch)
    monkeypatch.setenv(tpio.REGISTRY_ENV, "no-port-here")
    code, _, err = run_cli(capsys, ["flash", model_file, "--target", "nucleo_f446re", "-o", tmp_path / "p",
                                      "--framework", "arduino"])
    assert code == 2 and err.startswith("treegen: error: TREEGEN_PIO_REGISTRY='no-port-here'"), err


@pytest.mark.parametrize("version, spec, ok", [
    ("19.6.0", "~19.6.0", True), ("19.6.9", "~19.6.0", True), ("19.7.0", "~19.6.0", False),
    ("19.5.9", "~19.6.0", False), ("19.9.0", "^19.6.0", True), ("20.0.0", "^19.6.0", False),
    ("0.2.5", "^0.2.1", True), ("0.3.0", "^0.2.1", False), ("5.2.0", "5.2.0", True), ("5.2.1", "5.2.0", False),
    ("1.0.0", "", True), ("garbage", "~1.0.0", False),
])
def test_version_matches(version, spec, ok):
    assert tpio.version_matches(version, spec) is ok
