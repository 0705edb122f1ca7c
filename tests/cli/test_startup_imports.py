"""``treegen --help``, ``--version`` and ``targets`` answer without loading a numerical, plotting,
parallel or device library (issue 35): each command imports what it uses. Checked from the
``python -X importtime`` listing of a fresh process (which modules were imported), not with a timer.
``import treegen`` stays as light."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import treegen

ROOT = Path(treegen.__file__).resolve().parents[1]

#: top-level packages none of the light commands may import
HEAVY = ("numpy", "joblib", "dask", "distributed", "matplotlib", "scipy", "serial", "platformio", "tqdm",
         "sklearn", "jinja2", "xgboost", "lightgbm", "onnx", "catboost", "pandas")


#: ``python -m treegen ARGS``, with the modules loaded at exit (``sys.modules``: also those imported with
#: importlib, which ``-X importtime`` does not list) written to the file $TREEGEN_TEST_MODULES
AS_MAIN = """
import atexit, os, runpy, sys
atexit.register(lambda: open(os.environ["TREEGEN_TEST_MODULES"], "w").write("\\n".join(sorted(sys.modules))))
sys.argv[0] = "treegen"
runpy.run_module("treegen", run_name="__main__", alter_sys=True)
"""


def imported_modules(tmp_path, *argv: str, code: str = AS_MAIN) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules a fresh ``python -X importtime`` running ``code`` (default: ``python -m treegen ARGV``)
    imported: those ``-X importtime`` lists and those in ``sys.modules`` at exit; and the finished process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TREEGEN_TEST_MODULES"] = str(tmp_path / "modules.txt")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *argv], capture_output=True, text=True,
                          timeout=120, env=env)
    listed = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert len(listed) > 1, proc.stderr[-2000:]       # the listing is there: the test can see an import
    at_exit = (tmp_path / "modules.txt").read_text().split()
    assert "treegen" in at_exit, at_exit
    return set(listed[1:]) | set(at_exit), proc      # listed[0] is the header "package"


def heavy_in(names: list[str]) -> list[str]:
    return sorted({n for n in names if n.split(".")[0] in HEAVY})


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["targets"], []], ids=["version", "help", "targets", "bare"])
def test_light_commands_import_no_heavy_module(tmp_path, argv):
    names, proc = imported_modules(tmp_path, *argv)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "treegen.cli.main" in names           # the command line really ran in this process
    assert heavy_in(names) == []


def test_import_treegen_is_light(tmp_path):
    code = AS_MAIN.split("sys.argv[0]")[0] + "import treegen\ntreegen.__version__\n"
    names, proc = imported_modules(tmp_path, code=code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "treegen" in names
    assert heavy_in(names) == []


def test_a_command_imports_only_its_own_cli_module(tmp_path):
    """``treegen targets --help`` builds the targets parser only: the other commands' modules (fit's
    estimators, export's code generator) are not imported to list them."""
    names, proc = imported_modules(tmp_path, "targets", "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    cli_modules = {n for n in names if n.startswith("treegen.cli.")}
    assert "treegen.cli.targets" in cli_modules
    assert not cli_modules & {"treegen.cli.models", "treegen.cli.export", "treegen.cli.compare", "treegen.cli.tune",
                              "treegen.cli.hil", "treegen.cli.firmware", "treegen.cli.plot", "treegen.cli.imports"}


def test_the_listing_sees_a_heavy_import(tmp_path):
    """The check itself: a command that does load numpy (fit's parser reads the estimators) is seen."""
    names, proc = imported_modules(tmp_path, "fit", "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "numpy" in heavy_in(names)


# ---------------------------------------------------------------------- the lazy parser says the same
def test_lazy_parser_help_is_the_full_parsers_help():
    """``treegen --help`` from the command table (no command module imported) is the text of the
    parser with every command built; every command's own help is the same whichever way it is built."""
    from treegen.cli.commands import COMMANDS
    from treegen.cli.main import build_parser
    from treegen.cli.paths import subparser

    full = build_parser()
    assert build_parser(None).format_help() == full.format_help()
    sub_action = next(a for a in full._actions if a.__class__.__name__ == "_SubParsersAction")
    assert list(sub_action.choices) == list(COMMANDS)             # the table names every command, in order
    for name in COMMANDS:
        alone = build_parser(name)
        assert alone.format_help() == full.format_help(), name
        assert subparser(alone, name).format_help() == subparser(full, name).format_help(), name


def test_an_unknown_command_is_one_error_line_naming_them_all(capsys):
    from conftest import assert_user_error
    from treegen.cli.commands import COMMANDS

    line = assert_user_error(capsys, ["fti", "x.csv"], "invalid choice: 'fti'")
    assert all(f"'{name}'" in line for name in COMMANDS)


def test_fit_loads_no_parallel_plotting_or_device_library(tmp_path):
    """``treegen fit`` (not on a terminal: no progress bar) loads numpy and the learners, not joblib,
    Dask, SciPy, matplotlib, pyserial, PlatformIO, scikit-learn or tqdm."""
    data = tmp_path / "toy.csv"
    data.write_text("a,b,label\n" + "".join(f"{i},{(7 * i) % 10},{1 + (i > 4)}\n" for i in range(10)))
    names, proc = imported_modules(tmp_path, "fit", str(data), "--algo", "cart", "-o", str(tmp_path / "m.json"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "numpy" in heavy_in(names)
    assert [n for n in heavy_in(names) if n.split(".")[0] not in ("numpy", "jinja2")] == []


def test_a_second_native_fit_renders_no_template(tmp_path):
    """The native EFTI engine built once (TREEGEN_CACHE), a later ``fit --algo efti`` loads it without
    rendering its templates: Jinja is not imported (core.native's inputs index)."""
    data = tmp_path / "toy.csv"
    data.write_text("a,b,label\n" + "".join(f"{i},{(7 * i) % 10},{1 + (i > 4)}\n" for i in range(10)))
    argv = ["fit", str(data), "--algo", "efti", "--max-iter", "200", "--engine", "native", "-o", str(tmp_path / "m.json")]
    first, proc = imported_modules(tmp_path, *argv)
    assert proc.returncode == 0, proc.stderr[-2000:]
    second, proc = imported_modules(tmp_path, *argv)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "treegen.learn.engine" in second
    assert "jinja2" not in second
