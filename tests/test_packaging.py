"""Packaging: the wheel ships templates/ and targets/ inside the package and the console script;
package resources resolve both in the checkout and from an unpacked wheel."""

from __future__ import annotations

import configparser
import email.parser
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import treegen
from treegen.core import resources

REPO = Path(__file__).resolve().parents[1]


def _files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory):
    """Build the wheel once; returns (wheel path, package files in the checkout before the build)."""
    expected = {
        "templates": _files_under(REPO / "templates"),
        "targets": _files_under(REPO / "targets"),
        "treegen": {f for f in _files_under(REPO / "treegen") if f.endswith(".py")},
    }
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-q", "-w", str(out), "."],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}"
    wheels = list(out.glob("treegen-*.whl"))
    assert len(wheels) == 1, f"expected one treegen wheel, got {os.listdir(out)}"
    return wheels[0], expected


@pytest.mark.slow
def test_wheel_contains_templates_and_targets(built_wheel):
    wheel, expected = built_wheel
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {n.removeprefix("treegen/templates/") for n in names if n.startswith("treegen/templates/")}
    targets = {n.removeprefix("treegen/targets/") for n in names if n.startswith("treegen/targets/")}
    assert templates, "wheel has no treegen/templates/ files"
    assert targets, "wheel has no treegen/targets/ files"
    assert expected["templates"] <= templates, f"missing templates: {sorted(expected['templates'] - templates)}"
    assert expected["targets"] <= targets, f"missing targets: {sorted(expected['targets'] - targets)}"
    # the data live inside the package only, not as top-level folders
    assert not any(n.startswith(("templates/", "targets/", "tests/")) for n in names)


@pytest.mark.slow
def test_wheel_contains_the_whole_package(built_wheel):
    wheel, expected = built_wheel
    names = set(zipfile.ZipFile(wheel).namelist())
    in_wheel = {n.removeprefix("treegen/") for n in names if n.startswith("treegen/") and n.endswith(".py")}
    assert {"__init__.py", "core/resources.py", "core/tree.py", "core/model.py", "cli/__init__.py", "cli/main.py",
            "learn/inducers/__init__.py", "importers/sklearn.py"} <= in_wheel
    assert expected["treegen"] <= in_wheel, f"modules missing from the wheel: {sorted(expected['treegen'] - in_wheel)}"
    # the quickstart's datasets ship inside the package (treegen dataset NAME -o FILE)
    from treegen.core.samples import SAMPLES
    assert {f"treegen/core/sample_data/{n}.csv.gz" for n in SAMPLES} <= names


@pytest.mark.slow
def test_wheel_metadata_and_console_script(built_wheel):
    wheel, _ = built_wheel
    with zipfile.ZipFile(wheel) as zf:
        dist_info = {n.split("/")[0] for n in zf.namelist() if ".dist-info/" in n}
        assert dist_info == {f"treegen-{treegen.__version__}.dist-info"}
        (info,) = dist_info
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        metadata = email.parser.Parser().parsestr(zf.read(f"{info}/METADATA").decode())
    parser = configparser.ConfigParser()
    parser.read_string(entry_points)
    assert parser.has_section("console_scripts"), entry_points
    assert parser.get("console_scripts", "treegen").strip() == "treegen.cli:main"
    assert metadata["Name"] == "treegen"
    assert metadata["Version"] == treegen.__version__
    requires = " ".join(metadata.get_all("Requires-Dist") or [])
    for dep in ("numpy", "jinja2"):
        assert dep in requires.lower()
    # the pytest plugin, and the dependencies split by use: a fit/export install pulls no device tools
    assert parser.get("pytest11", "treegen.hil.plugin").strip() == "treegen.hil.plugin"
    core = [r.lower() for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    assert not [r for r in core if r.startswith(("pyserial", "platformio", "scons", "pytest", "matplotlib", "scipy"))]
    assert {"device", "hil", "plot", "compare", "test"} <= set(metadata.get_all("Provides-Extra"))
    device = [r for r in metadata.get_all("Requires-Dist") if "extra == 'device'" in r.replace('"', "'")]
    assert any(r.startswith("platformio==6.2.0") for r in device) and any(r.startswith("pyserial") for r in device)


@pytest.mark.slow
def test_resources_resolve_from_the_unpacked_wheel(built_wheel, tmp_path):
    wheel, _ = built_wheel
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import treegen, treegen.core.resources as r\n"
        "from treegen.cli import main\n"
        "assert callable(main)\n"
        "print(treegen.__file__); print(r.templates_dir()); print(r.targets_dir())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    pkg_file, templates, targets = (Path(line) for line in proc.stdout.split())
    assert pkg_file.resolve().is_relative_to(site.resolve()), "imported the checkout instead of the wheel"
    assert templates.resolve() == (site / "treegen" / "templates").resolve()
    assert targets.resolve() == (site / "treegen" / "targets").resolve()


def test_resources_resolve_in_the_checkout():
    assert Path(treegen.__file__).resolve().parent == REPO / "treegen", "tests must run against the checkout"
    assert resources.templates_dir() == REPO / "templates"
    assert resources.targets_dir() == REPO / "targets"
    assert resources.templates_dir().is_dir() and resources.targets_dir().is_dir()
    assert any(resources.templates_dir().iterdir())
    assert any(resources.targets_dir().iterdir())


def test_missing_resource_folder():
    with pytest.raises(FileNotFoundError, match="no-such-folder"):
        resources.resource_dir("no-such-folder")
