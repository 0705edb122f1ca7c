"""The extras: fit, cv, export, predict and show work with the core dependencies only (without the
device extra: pyserial, platformio, scons; the compare extra: scipy, distributed; the plugin's pytest),
and each command that needs a missing extra says so in one line (``... needs the device extra: pip
install 'treegen[device]'``, exit 2). Missing packages are simulated by blocking their import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import assert_user_error

REPO = Path(__file__).resolve().parents[2]
EXTRA_MODULES = ("serial", "platformio", "SCons", "scipy", "distributed", "dask", "pytest", "matplotlib")

BLOCKED_RUN = '''
import sys
class Block:
    """An import hook refusing the device extra's modules (as if they were not installed)."""
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
from treegen.cli import main
for argv in {commands!r}:
    code = main(argv)
    assert code == 0, (argv, code)
print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in {blocked!r}))
'''


def test_fit_cv_export_predict_show_need_no_extra(tmp_path, datasets_dir):
    data = datasets_dir / "irs.csv.gz"
    model = tmp_path / "m.json"
    commands = [
        ["fit", str(data), "--algo", "cart", "--max-depth", "3", "-o", str(model), "-q"],
        ["export", str(model), "--target", "cortex-m4", "-o", str(tmp_path / "c")],
        ["predict", str(model), str(data), "-o", str(tmp_path / "pred.csv")],
        ["show", str(model)],
        ["cv", str(data), "--algo", "cart", "--max-depth", "3", "--folds", "2", "-q"],
    ]
    code = BLOCKED_RUN.format(blocked=set(EXTRA_MODULES), commands=commands)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "loaded: []" in proc.stdout
    assert list((tmp_path / "c").glob("*.c")) and (tmp_path / "pred.csv").is_file()


@pytest.fixture
def cart_model(tmp_path, datasets_dir, capsys):
    from conftest import run_cli

    model = tmp_path / "m.json"
    code, _, err = run_cli(capsys, ["fit", datasets_dir / "irs.csv.gz", "--algo", "cart", "--max-depth", "3",
                                    "-o", model, "-q"])
    assert code == 0, err
    return model


def test_hil_without_pyserial_names_the_extra(cart_model, datasets_dir, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "serial", None)          # import serial -> ImportError
    assert_user_error(capsys, ["hil", cart_model, "--target", "native", "--port", "socket://127.0.0.1:9",
                               "--data", datasets_dir / "irs.csv.gz"],
                      "pyserial is not installed; talking to a device needs the device extra: "
                      "pip install 'treegen[device]'")


@pytest.mark.parametrize("module,package", [("platformio", "platformio"), ("SCons", "scons")])
def test_build_without_platformio_names_the_extra(module, package, cart_model, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)            # importlib.util.find_spec -> None
    assert_user_error(capsys, ["build", cart_model, "--target", "qemu-m4", "-o", tmp_path / "fw"],
                      f"{package} is not installed; building firmware needs the device extra: "
                      "pip install 'treegen[device]'")


def test_compare_without_scipy_names_the_extra(tmp_path, datasets_dir, capsys, monkeypatch):
    import treegen.core
    import treegen.learn

    # imported afresh, as in a new process (the modules, and the packages' attributes naming them)
    for mod in ("treegen.core.stats", "treegen.learn.compare"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    monkeypatch.delattr(treegen.core, "stats", raising=False)
    monkeypatch.delattr(treegen.learn, "compare", raising=False)
    monkeypatch.setitem(sys.modules, "scipy", None)
    assert_user_error(capsys, ["compare", datasets_dir / "bcw.csv.gz", "--algos", "cart", "--json",
                               tmp_path / "c.json"],
                      "scipy is not installed; treegen compare (its statistical tests) needs the compare extra: "
                      "pip install 'treegen[compare]'")
