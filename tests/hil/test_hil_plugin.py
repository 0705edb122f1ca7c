"""treegen.hil as a pytest plugin: the options and fixtures in a user's own tests, nothing imported
or collected for a plain run, loud failures without a device, and the bundled checks from a fresh
virtual environment outside the checkout (``pip install '<checkout>[hil]'`` then
``pytest --pyargs treegen.hil --treegen-target native ...``)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from treegen.core.model import save
from treegen.learn.estimators import CARTClassifier

REPO = Path(__file__).resolve().parents[2]
PLUGIN = "treegen.hil.plugin"


@pytest.fixture(scope="module")
def model_and_data(tmp_path_factory):
    """A CART model on four named features and its CSV (columns in another order than the model's)."""
    d = tmp_path_factory.mktemp("plugin-model")
    rng = np.random.default_rng(7)
    X = rng.integers(0, 1000, size=(240, 4)).astype(float)
    y = (X[:, 0] + 2 * X[:, 1] > 1400).astype(int) + (X[:, 3] > 700)
    clf = CARTClassifier(max_depth=4).fit(X, y, feature_names=["a", "b", "c", "d"])
    model = save(clf.model_, d / "m.json")
    order = [2, 0, 3, 1]                       # matched back by name
    lines = ["c,a,d,b,label"]
    lines += [",".join(str(int(v)) for v in row[order]) + f",{lab}" for row, lab in zip(X, y)]
    data = d / "d.csv"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return model, data


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return {**env, **extra}


def run_pytest(args, cwd, *, python=sys.executable, env=None, timeout=300):
    return subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", *map(str, args)], cwd=cwd,
                          env=env if env is not None else _env(PYTHONPATH=str(REPO)), capture_output=True,
                          text=True, timeout=timeout)


USER_TESTS = '''
import sys

def test_plain():
    # the plugin is loaded, yet neither numpy nor treegen's model code was imported
    assert "treegen.hil.plugin" in sys.modules
    assert "numpy" not in sys.modules and "treegen.core.model" not in sys.modules
'''

USER_DEVICE_TEST = '''
def test_my_firmware(treegen_device, treegen_model, treegen_case, treegen_target, treegen_record):
    rows = treegen_case.ref.X_q15[:20]
    assert treegen_device.predict(rows).tolist() == treegen_case.ref.fixed[:20].tolist()
    assert treegen_device.info().model_hash == treegen_model.hash()
    assert treegen_target.name == "native"
    treegen_record("rows", len(rows))
'''


def test_plain_pytest_run_is_untouched(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS, encoding="utf-8")
    # the options are registered (pytest rejects unknown ones) and read only by a test that asks for the
    # device: a model file that does not exist and a port nobody serves change nothing here
    proc = run_pytest(["-p", PLUGIN, "-q", "--treegen-target", "qemu-m4", "--treegen-port", tmp_path / "no-tty",
                       "--treegen-model", tmp_path / "no-model.json", "--treegen-data", tmp_path / "no.csv"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("1 passed"), proc.stdout


def test_fixtures_in_a_users_own_test(tmp_path, model_and_data):
    model, data = model_and_data
    (tmp_path / "test_mine.py").write_text(USER_DEVICE_TEST, encoding="utf-8")
    junit = tmp_path / "out.xml"
    proc = run_pytest(["-p", PLUGIN, "-q", "-W", "error::pytest.PytestWarning", "--treegen-target", "native",
                       "--treegen-model", model, "--treegen-data", data, f"--junitxml={junit}"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert {p.get("name"): p.get("value") for p in case.iter("property")} == {"rows": "20"}


def test_without_a_device_the_tests_fail_not_skip(tmp_path, model_and_data):
    model, _ = model_and_data
    (tmp_path / "test_mine.py").write_text(USER_DEVICE_TEST, encoding="utf-8")
    proc = run_pytest(["-p", PLUGIN, "-q", "-rA", "--treegen-model", model], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 error" in proc.stdout and "skipped" not in proc.stdout
    assert "no device under test: pass --treegen-target T" in proc.stdout
    # a port where no device answers: one clear error, not a skip
    proc = run_pytest(["-p", PLUGIN, "-q", "--treegen-target", "native", "--treegen-port", tmp_path / "no-such-tty",
                       "--treegen-model", model, "--treegen-timeout", "2"], tmp_path)
    assert proc.returncode == 1 and "skipped" not in proc.stdout, proc.stdout + proc.stderr
    assert "cannot open the device's port" in proc.stdout


@pytest.mark.slow
def test_bundled_checks_from_a_fresh_venv_outside_the_checkout(tmp_path, model_and_data):
    """Acceptance: ``pip install '<checkout>[hil]'`` into a new venv, then ``pytest --pyargs treegen.hil``
    from another folder passes, with treegen, its templates and targets all from the venv.

    The venv sees the system's site-packages for the dependencies (numpy, pytest, pyserial, ...), and
    pip installs without an index and without build isolation (hatchling from the test extra): the
    test needs no network, and pip fails if a dependency of ``[hil]`` is not installed."""
    model, data = model_and_data
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=120)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    env = _env()
    env.pop("PYTHONPATH", None)                # nothing may point at the checkout
    work = tmp_path / "elsewhere"
    work.mkdir()
    pip = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-cache-dir",
                          "--disable-pip-version-check", "-q", f"{REPO}[hil]"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, f"pip install failed:\n{pip.stdout}\n{pip.stderr}"

    code = ("import treegen, treegen.hil.plugin, treegen.core.resources as r; "
            "print(treegen.__file__); print(r.templates_dir()); print(r.targets_dir())")
    where = subprocess.run([str(py), "-c", code],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               env=env, capture_output=True, text=True, check=True).stdout.strip()).resolve()
    pkg, templates, targets = (Path(line).resolve() for line in where.stdout.split())
    assert pkg == site / "treegen" / "__init__.py", f"imported {pkg}, not the venv's install"
    assert templates == site / "treegen" / "templates" and (templates / "c").is_dir()
    assert targets == site / "treegen" / "targets" and (targets / "native.toml").is_file()

    junit = work / "hil.xml"
    proc = run_pytest(["--pyargs", "treegen.hil", "--treegen-target", "native", "--treegen-model", model,
                       "--treegen-data", data, f"--junitxml={junit}", "-rA"], work, python=py, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].strip("= ").startswith("10 passed in "), proc.stdout
    # the checks ran from the venv's copy, with the plugin found by its pytest11 entry point (no -p given)
    ran = [line.split()[1].split("::")[0] for line in proc.stdout.splitlines() if line.startswith("PASSED ")]
    assert len(ran) == 10 and all((work / f).resolve().parent == site / "treegen" / "hil" for f in ran), ran
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("10", "0", "0", "0")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["rows"] == "240" and props["float_agreement_pct"] == "100.0"


def test_parallel_workers_share_emulated_builds_not_native_ones(tmp_path):
    """hil/conftest.py gives the parallel workers of a run (pytest-xdist) one folder for the emulated
    boards' firmware: the second worker's Firmwares reuses the first's build (locked while built,
    checked by its stamp) instead of building it again; native harnesses stay each worker's own."""
    from treegen.core import targets
    from treegen.hil.cases import Case
    from treegen.hil.devices import Firmwares

    X = np.array([[i, (7 * i) % 10] for i in range(20)], dtype=float)
    y = np.array([1 + (i > 9) for i in range(20)])
    case = Case("cart-toy", "cart", CARTClassifier(max_depth=2).fit(X, y).model_, X, y, "table", "toy")
    shared = tmp_path / "shared"
    first = Firmwares(tmp_path / "gw0", shared=shared)
    second = Firmwares(tmp_path / "gw1", shared=shared)
    emulated = targets.get("qemu-m3")
    a, b = first.get(emulated, case), second.get(emulated, case)
    assert not a.reused and b.reused
    assert Path(a.path).resolve() == Path(b.path).resolve() and shared in Path(b.path).resolve().parents
    native = targets.get("native")
    n0, n1 = first.get(native, case), second.get(native, case)
    assert (tmp_path / "gw0") in Path(n0.path).parents and (tmp_path / "gw1") in Path(n1.path).parents
