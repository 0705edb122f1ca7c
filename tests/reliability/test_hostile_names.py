"""No file name becomes a command (issue 33): model names and output folders built of shell, Tcl and
avrdude syntax (quotes, ``;``, backticks, ``$(...)``, ``[...]``, braces, spaces, a newline) build and
link for every firmware target, ``treegen flash --dry-run`` prints the upload command, and a real
``treegen flash`` with a stub uploader on PATH (a script named pyocd / openocd / avrdude that records
its argument vector and working directory) runs exactly the printed command: the names arrive intact,
only as the uploader's working directory, and no marker file appears anywhere a hostile command could
have written it (the test's folders, the build and project folders, the temp folder, the home folder).

Before the fix, ``treegen build 'x y";touch M;echo ".json' --target qemu-m4`` ran ``touch M`` in the
link step (PlatformIO pasted the absolute linker-script path into a ``sh -c`` command line, quoted only
around spaces), and the HiFive1's OpenOCD command carried the path inside Tcl braces that a ``}`` in
the name closed.

The pyOCD probe and part checks query USB and pyOCD's target list; they are replaced here (the stub
stands in for the probe), everything else runs for real: PlatformIO, SCons, the cross compilers.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from conftest import run_cli

from treegen import CARTClassifier, save
from treegen.core import targets
from treegen.device import platformio as tpio
from treegen.device import upload as up

pytestmark = pytest.mark.slow          # about 30 offline PlatformIO builds

#: one marker file name per session: other sessions' leftovers never count
MARK = f"PWNED_{uuid.uuid4().hex[:8]}"
WORST = f'x y";touch {MARK};echo "'
#: one name per class of syntax a tool might parse, with the board (uploader) it is flashed to;
#: WORST goes to every target. ($ and a tab are refused: PlatformIO's SCons and PlatformIO parse them.)
NAMED = [
    (f"a`touch {MARK}`b", "nucleo_l031k6"),                        # shell command substitution (pyOCD)
    (f"it's;touch {MARK}", "nucleo_f446re"),                       # a single quote (broke the Nucleo link)
    ("x} verify; shutdown; program {y", "hifive1"),                # OpenOCD Tcl: closed program's braces
    (f"a[exec touch {MARK}]b flash:w:c:e", "hifive1"),             # Tcl command substitution
    (f"a[exec touch {MARK}]b flash:w:c:e", "arduino_uno"),         # avrdude's -U memtype:op:file:format
    (f"sp ace\nnew line;touch {MARK}", "arduino_uno"),              # a newline
    (f"sp ace\nnew line;touch {MARK}", "bluepill_f103c8"),
]
FIRMWARE = sorted(t.name for t in targets.all_targets()
                  if t.kind == "emulated" or (t.kind == "board" and tpio.offline(t)))
BOARDS = [n for n in FIRMWARE if targets.get(n).kind == "board"]
#: one board per uploader
UPLOADER_BOARDS = ["nucleo_l031k6", "hifive1", "arduino_uno"]
COMPILERS = {"arm-none-eabi-gcc", "avr-gcc", "riscv64-unknown-elf-gcc"}

STUB = """#!{python}
import json, os, sys
with open(os.environ["TG_STUB_RECORD"], "a", encoding="utf-8") as fh:
    fh.write(json.dumps({{"argv0": sys.argv[0], "argv": sys.argv[1:], "cwd": os.getcwd()}}) + "\\n")
"""


def _require_compilers():
    missing = sorted(c for c in COMPILERS if shutil.which(c) is None)
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: bash scripts/setup.sh installs the cross compilers", pytrace=False)


@pytest.fixture()
def here(tmp_path, monkeypatch):
    """A working folder holding a small model; stub uploaders first on PATH; the probe checks replaced."""
    _require_compilers()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ("pyocd", "openocd", "avrdude"):
        (stubs / name).write_text(STUB.format(python=sys.executable), encoding="utf-8")
        (stubs / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{stubs}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TG_STUB_RECORD", str(tmp_path / "record.jsonl"))
    monkeypatch.setattr(up, "check_probe", lambda target: None)
    monkeypatch.setattr(up, "check_part", lambda target: None)
    X = [[0, 0], [1, 1], [2, 0], [3, 1]] * 5
    y = [0, 0, 1, 1] * 5
    model = CARTClassifier(max_depth=2).fit(X, y).model_
    yield work, model, tmp_path
    _assert_no_marker(tmp_path)


def _assert_no_marker(tmp_path: Path):
    """No file named by the marker (``touch MARK`` in any folder below the test's, which holds the project
    folders and the tools' working directories, nor in the current, temp or home folder)."""
    found = [p for p in tmp_path.rglob(f"{MARK}*")]
    found += [p for place in (Path.cwd(), Path(tempfile.gettempdir()), Path.home()) for p in place.glob(f"{MARK}*")]
    assert not found, f"a name ran a command: {found}"


def _records(tmp_path: Path) -> list[dict]:
    path = tmp_path / "record.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _printed(out: str, field: str = "upload") -> list[str]:
    """The words of the command printed after ``field`` (a quoted newline may continue it on the next line)."""
    start = out.index(f"\n{field} ") + 1 if not out.startswith(f"{field} ") else 0
    text = out[start + len(field):]
    lines = text.split("\n")
    for n in range(1, len(lines) + 1):
        try:
            return shlex.split("\n".join(lines[:n]))
        except ValueError:                 # an open quote: the command goes on on the next line
            continue
    raise AssertionError(f"no complete command after {field!r}: {out}")


def _model_file(work: Path, model, name: str) -> Path:
    path = work / f"{name}.json"
    save(model, path)
    return path


def _flash_and_check(capsys, model_file: Path, target: str, out: Path, tmp_path: Path, option: bool = True):
    """flash --dry-run, then flash with the stub: the recorded command is the printed one, the image is
    the built ELF, named by its file name in its folder. ``option``: -o OUT given (else the default
    folder, derived from the model's name, is ``out``)."""
    extra = ["-o", out] if option else []
    code, dry, err = run_cli(capsys, ["flash", model_file, "--target", target, "--dry-run", *extra])
    assert code == 0, err
    printed = _printed(dry)
    assert _records(tmp_path) == []                                  # a dry run runs nothing
    code, wet, err = run_cli(capsys, ["flash", model_file, "--target", target, *extra])
    assert code == 0, err
    assert _printed(wet) == printed
    (rec,) = _records(tmp_path)
    elf_dir = out.absolute() / ".pio" / "build" / tpio.env_name(target)
    uploader = up.uploader_for(target)
    assert printed[:3] == ["cd", str(elf_dir), "&&"], printed
    assert Path(rec["argv0"]).name == printed[3] == uploader
    assert rec["argv"] == printed[4:]                                 # exactly the printed command
    assert rec["cwd"] == str(elf_dir)                                 # the name intact, as a directory
    assert (Path(rec["cwd"]) / "firmware.elf").is_file()
    assert "firmware.elf" in rec["argv"] or any(a.endswith(":firmware.elf:e") or a.startswith("program firmware.elf")
                                               for a in rec["argv"])
    if uploader == "openocd":                                         # the Tcl holds no name at all
        assert rec["argv"][-2:] == ["-c", "program firmware.elf verify reset exit"]
    (tmp_path / "record.jsonl").unlink()
    return rec


@pytest.mark.parametrize("target", FIRMWARE)
def test_every_target_builds_and_flashes_the_worst_name(target, here, capsys):
    """The reported name as the model file; the project folder is derived from it (build/<stem>-<target>)."""
    work, model, tmp_path = here
    model_file = _model_file(work, model, WORST)
    out = Path("build") / f"{WORST}-{target}"
    if target in BOARDS:
        _flash_and_check(capsys, model_file, target, out, tmp_path, option=False)
    else:
        code, text, err = run_cli(capsys, ["build", model_file, "--target", target])
        assert code == 0, err
        image = targets.get(target).image or target                    # qemu-hifive1 runs the hifive1 image
        assert (work / out / ".pio" / "build" / tpio.env_name(image) / "firmware.elf").is_file()
        assert _printed(text, "run") == ["treegen", "flash", str(model_file), "--target", target, "-o", str(out)]
    # nothing written beside it (but the folder's lock file)
    assert [p.name for p in (work / "build").iterdir() if not p.name.endswith(".treegen-lock")] == [out.name]


@pytest.mark.parametrize("name, target", NAMED, ids=[f"{t}-{i}" for i, (_, t) in enumerate(NAMED)])
def test_hostile_names_on_every_uploader(name, target, here, capsys):
    """The other names as the model file (its default project folder), each on a board whose uploader
    might parse it."""
    work, model, tmp_path = here
    model_file = _model_file(work, model, name)
    _flash_and_check(capsys, model_file, target, Path("build") / f"{name}-{target}", tmp_path, option=False)


def test_hostile_output_folder(here, capsys):
    work, model, tmp_path = here
    model_file = _model_file(work, model, "m")
    for target in ("qemu-hifive1", "qemu-m33"):
        code, _, err = run_cli(capsys, ["build", model_file, "--target", target, "-o", f'fw a"b;touch {MARK};"'])
        assert code == 0, err
    _flash_and_check(capsys, model_file, "hifive1", work / f"fw a'b;touch {MARK};'" / "x} y", tmp_path)


def test_platformio_upload_runs_the_builders_command_without_a_shell(here, capsys):
    """``--uploader platformio``: ``pio run -t upload`` runs the board's uploader through the project's
    SCons builder; it names the image relative to the project folder."""
    work, model, tmp_path = here
    model_file = _model_file(work, model, WORST)
    out = work / f'fw a"b;touch {MARK};"'
    code, text, err = run_cli(capsys, ["flash", model_file, "--target", "hifive1", "-o", out,
                                       "--uploader", "platformio"])
    assert code == 0, err
    assert _printed(text) == ["pio", "run", "-d", str(out), "-t", "upload"]
    (rec,) = _records(tmp_path)
    assert rec["cwd"] == str(out) and Path(rec["argv0"]).name == "openocd"
    assert rec["argv"] == ["-f", "board/sifive-hifive1.cfg", "-c",
                           "program .pio/build/hifive1/firmware.elf verify reset exit"]


def test_hil_with_the_worst_name(here, capsys):
    work, model, tmp_path = here
    model_file = _model_file(work, model, WORST)
    data = work / f"d {WORST}.csv"
    data.write_text("a,b,class\n" + "".join(f"{i % 4},{i % 2},{int(i % 4 >= 2)}\n" for i in range(20)))
    code, out, err = run_cli(capsys, ["hil", model_file, "--target", "qemu-m33", "--data", data,
                                      "--bench-iters", "5", "-q"])
    assert code == 0, err
    assert "result          PASS" in out, out
    assert (work / "build" / f"{WORST}-qemu-m33" / ".pio" / "build" / "qemu_m33" / "firmware.elf").is_file()


@pytest.mark.parametrize("name, bad", [(f"$(touch {MARK})", "'$'"), (f"$HOME;touch {MARK}", "'$'"),
                                       (f"tab\there;touch {MARK}", "'\\t'")],
                         ids=["dollar-subshell", "dollar-variable", "tab"])   # MARK differs per process (xdist)
def test_a_dollar_or_tab_in_the_project_path_is_one_line(name, bad, here, capsys):
    """PlatformIO's SCons expands $NAME and $(...) in the project path, PlatformIO turns a tab into a
    space (each built in another folder, or failed): refused before anything is written."""
    work, model, _ = here
    model_file = _model_file(work, model, name)
    code, _, err = run_cli(capsys, ["build", model_file, "--target", "qemu-m4"])
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("treegen: error: the project path ") and f"holds {bad}" in err, err
    assert not (work / "build" / f"{name}-qemu-m4").exists()


def test_the_online_arduino_build_refuses_shell_syntax(here, capsys):
    """An official PlatformIO platform's scripts are not treegen's: their commands go through a shell, so
    a project path with shell syntax is refused (one line) before the project is written."""
    work, model, _ = here
    model_file = _model_file(work, model, "m")
    out = work / f"fw;touch {MARK}"
    code, _, err = run_cli(capsys, ["build", model_file, "--target", "nucleo_f446re", "--framework", "arduino",
                                    "-o", out])
    assert code == 2 and err.count("\n") == 1, err
    assert "holds ';'" in err and "--framework arduino" in err, err
    assert not out.exists()


@pytest.mark.parametrize("image", ["/abs/firmware.elf", "a b.elf", "x}.elf", "a[b].elf", "a;b", "-x.elf",
                                   "flash:w:x", "a\nb", "a'b", 'a"b', "$(x)"])
def test_upload_command_takes_plain_names_only(image):
    for board in UPLOADER_BOARDS:
        if image == "/abs/firmware.elf":
            assert image in " ".join(up.upload_command(board, image))
            continue
        with pytest.raises(Exception, match="not a plain name"):
            up.upload_command(board, image)


def test_shown_is_the_command_for_a_shell():
    cwd = 'a b";touch x;echo "\n$(y)`z`'
    cmd = ["openocd", "-c", "program firmware.elf verify reset exit"]
    assert shlex.split(up.shown(cmd, cwd)) == ["cd", cwd, "&&", *cmd]
    assert shlex.split(up.shown(cmd)) == cmd
