"""Every command of README.md, docs/**/*.md and hil/README.md runs, for real.

A command is a line of a ```sh block (backslash continuations and here-documents joined; ``NAME=value``
lines are kept as that document's shell variables) or a whole ```python block. README.md's commands
run first, in order, in a temporary folder that has ``../shared`` beside it as in the checkout (its
quickstart writes the ``veh.json`` the guide pages use); then every other block runs in a folder of
its own holding a copy of README's files, two blocks at a time. This checkout comes first on
PYTHONPATH and ``python`` is the interpreter running the tests. A command documented twice (same
text, same variables) runs once. Every command must exit 0 without a traceback, except where one of
the tables below says otherwise:

- SUBSTITUTIONS: budget flags of long runs replaced by smaller ones (the command is otherwise run as
  written);
- OFFLINE: commands for a real board attached at /dev/ttyACM0, checked by their offline error path
  (exit status and message);
- PYTEST_BLOCKS: python blocks that are a user's pytest test, run by pytest with the plugin's options;
- IN_CHECKOUT: commands that name the checkout's own folders, run from its root (writing nothing there);
- EXCLUDED: the few commands not run here, each with its reason and, where another test or CI runs
  it, a string that must be found in that file;
- docs/api.md's python blocks run in tests/test_api_doc.py (checked: the same blocks).

Each table entry must match a documented command (a stale entry fails), and links between the
documents must resolve (files and #anchors).
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
README = REPO / "README.md"

# the one document another piece of work writes in parallel: README links to it before it exists
NOT_YET_WRITTEN: set[str] = set()

# (document, a string that identifies the command, old, new): budgets only; reason in the comment
SUBSTITUTIONS = [
    # 300 tasks of 100k EFTI iterations on a Dask cluster: 2 folds x 1 repetition, 1000 iterations
    ("docs/guide/compare.md", "treegen compare bcw pid gls veh", "--folds 5 --repeats 5", "--folds 2 --repeats 1"),
    ("docs/guide/compare.md", "cat > params.json", '"max_iter": 100000', '"max_iter": 1000'),
    # GP at the paper's 200,000 iterations, 5 runs per fold: 200 iterations, 2 runs, one repetition
    ("docs/guide/compare.md", "cat > gp.json", '"max_iter": 200000', '"max_iter": 200'),
    ("docs/guide/compare.md", "--pick median", "--repeats 5 --runs-per-fold 5", "--repeats 1 --runs-per-fold 2"),
    ("docs/guide/compare.md", "--pick best-train", "--repeats 5 --runs-per-fold 5", "--repeats 1 --runs-per-fold 2"),
    # compare --task regression at bench/regression_cv.py's budget (80 tasks, 50-tree forests): 2 folds, 5 trees
    ("docs/guide/regression.md", "--task regression --algos cart,rf", "--folds 5 --repeats 2", "--folds 2 --repeats 1"),
    ("docs/guide/regression.md", "cat > reg-params.json", '"n_trees": 50', '"n_trees": 5'),
    # a forest of 100 CART trees: 20 trees
    ("docs/guide/algorithms.md", "--algo rf --n-trees 100", "--n-trees 100", "--n-trees 20"),
    # GP with vicinal risk, ~4 ms per iteration in Python: 20000 -> 500 iterations
    ("docs/guide/algorithms.md", "--algo gp --risk vicinal", "--max-iter 20000", "--max-iter 500"),
    # vicinal EFTI runs in the Python engine, 13 fits for sigma2 auto: 10000 -> 300 iterations
    ("docs/guide/algorithms.md", "--algo efti --risk vicinal", "--max-iter 10000", "--max-iter 300"),
    # distillation: the student trains on 3x the rows, 100000 -> 5000 iterations (the forest is the same)
    ("docs/guide/algorithms.md", "--teacher rf", "--max-iter 100000", "--max-iter 5000"),
    # DE-PDT at the paper's 2000 generations takes ~10 s: 200 generations
    ("docs/guide/algorithms.md", "--algo de-pdt", "--generations 2000", "--generations 200"),
    # EFTI on the emulated Cortex-M4: 50000 -> 2000 iterations (the host check is the same)
    ("docs/guide/on-device-training.md", "--engine device", "--max-iter 50000", "--max-iter 2000"),
]

# (regex on the command, expected exit status, regex the output must match, reason); no board is attached
OFFLINE = [
    (r"^treegen flash veh.json --target nucleo_f446re$", 2, r"(?m)^treegen: error: no debug probe found",
     "uploads with pyOCD to a real board: here the one-line error for the probe that is not attached"),
    (r"^treegen flash .*--port /dev/tty\w+", 2, r"(?m)^treegen: error: ",
     "uploads to a real board: here the offline error (PlatformIO registry unreachable, or no board)"),
    (r"^treegen hil .*--port /dev/tty\w+", 2, r"cannot open serial port /dev/tty\w+",
     "talks to a real board at its serial port: here the one-line error for a port that is not there"),
    (r"^python -m pytest hil .*--hil-port /dev/tty\w+", 1, r"cannot reach the device at --hil-port /dev/tty\w+",
     "the HIL suite against a real board: here every test fails (never skips) naming the port"),
    (r"^treegen hil .*--place nucleo-1 --coordinator lab-server:20408", 2,
     r"(?m)^treegen: error: cannot reach the labgrid coordinator at lab-server:20408",
     "the HIL on a real board of a labgrid lab: here the one-line error for the lab server that is not there"),
    (r"^pytest --pyargs treegen.hil .*--treegen-port /dev/tty\w+", 1, r"cannot open serial port /dev/tty\w+",
     "the plugin's bundled checks against a real board: here they fail (never skip) naming the port"),
]
# a closed local port stands for PlatformIO's registry, so `flash` to a board fails the same way online
OFFLINE_ENV = {"TREEGEN_PIO_REGISTRY": "127.0.0.1:9"}

# (document, first line of a python block, pytest arguments after the file): a test for the user's own suite
PYTEST_BLOCKS = [
    ("docs/guide/hil-and-plugin.md", "def test_my_rows(",
     "--treegen-target native --treegen-model veh.json --treegen-data $D/veh.csv.gz"),
]

# never run by this test (they change the machine): such a documented command must be in EXCLUDED
NEVER_RUN = r"(sudo |apt-get |apt |pip |pip3 |python -m pip |bash scripts/)"

# commands that name the checkout's folders (`hil`): run from its root; pytest writes no cache there
IN_CHECKOUT = [r"^python -m pytest hil "]

# (document, command as written, reason, (file, text that must be in it) or None)
_SUITE = ("pyproject.toml", 'testpaths = ["tests", "hil"]')
_INSTALL = ("tests/hil/test_hil_plugin.py", '"pip", "install"')
_CLUSTER = ("tests/cli/test_compare_cli.py", '"--scheduler"')
_LAB = ("a lab of real boards (a lab server, a host with a Nucleo); the emulated farm of the same page runs "
        "a real coordinator, exporters and places on 127.0.0.1")
_FARM_LAB = ("treegen/device/farm_lab.py", '"labgrid-exporter", "-c", self.address')
_FARM_PLACES = ("treegen/device/farm_lab.py", 'lab.define_place(p.name, [f"{p.exporter}/{p.name}/*"]')
_BENCH = "a benchmark: hours on a 2-core machine, and it rewrites the committed bench/results/"
EXCLUDED = [
    ("README.md", "bash scripts/main_job.sh",
     "runs scripts/setup.sh first (apt-get, pip install -e: changes the machine); its fit, eval, show, export, "
     "build and hil commands are the quickstart's, run here (checked below)", None),
    ("README.md", "bash scripts/test.sh", "the whole test suite, this test included; CI runs it",
     (".ci/run", "bash scripts/test.sh")),
    ("README.md", "pip install -e '.[test]'", "installs into the running environment", _INSTALL),
    ("README.md", "pip install .", "installs into the running environment", _INSTALL),
    ("README.md", "pip install '.[device]'", "installs into the running environment", _INSTALL),
    ("docs/guide/hil-and-plugin.md", "pip install 'treegen[hil]'", "installs into the running environment; "
     "the test installs the checkout with its hil extra into a fresh venv", _INSTALL),
    ("docs/guide/compare.md", "A$ dask scheduler --host 10.0.0.1 --port 8786",
     "two machines; the test runs a real scheduler and workers on 127.0.0.1", _CLUSTER),
    ("docs/guide/compare.md", "A$ dask worker tcp://10.0.0.1:8786 --nworkers 4 --nthreads 1", "two machines", _CLUSTER),
    ("docs/guide/compare.md", "B$ dask worker tcp://10.0.0.1:8786 --nworkers 8 --nthreads 1", "two machines", _CLUSTER),
    ("docs/guide/compare.md", "A$ treegen compare bcw pid gls veh --data-dir ../shared/datasets --algos efti,cart "
     "--params params.json --folds 5 --repeats 5 --json cmp.json --scheduler tcp://10.0.0.1:8786",
     "two machines; the test compares a cluster run with a local one", _CLUSTER),
    ("docs/guide/compare.md", "A$ treegen cv ../shared/datasets/veh.csv.gz --algo efti --folds 5 --repeats 5 "
     "--scheduler tcp://10.0.0.1:8786", "two machines; the test runs cv --scheduler",
     ("tests/cli/test_compare_cli.py", '"cv"')),
    ("docs/guide/benchmarks.md", "python bench/paper_table.py --iters 500000 --ko 0.05 --repeats 5", _BENCH, None),
    ("docs/guide/benchmarks.md", "python bench/alternatives.py --algos de-pdt,efti,cart --datasets irs,gls,son "
     "--protocol split --runs 30 --jobs 2", _BENCH, None),
    ("docs/guide/benchmarks.md", "python bench/alternatives.py --algos de-cart,cart,de-id3,id3,cart-naive,id3-naive,"
     "sk-entropy --datasets veh,seg,w40,pen --protocol cv", _BENCH, None),
    ("docs/guide/benchmarks.md", "python bench/import_exactness.py --big-forest", _BENCH, None),
    ("docs/guide/benchmarks.md", "python bench/hil_bench.py", _BENCH, None),
    ("docs/guide/benchmarks.md", "python bench/train_device_bench.py --datasets veh,pid,seg --iters 2000 --seed 1 "
     "--builds qemu-m4:scalar,qemu-m4:dsp,qemu-m55:scalar,qemu-m55:dsp,qemu-m55:mve,qemu-m33:scalar,qemu-m33:dsp "
     "--partial on --dot-cost", _BENCH, None),
    ("docs/guide/benchmarks.md", "python bench/published_ranks.py", _BENCH, None),
    ("docs/guide/board-farm.md", "labgrid-coordinator -l 0.0.0.0:20408", _LAB, _FARM_LAB),
    ("docs/guide/board-farm.md", "labgrid-exporter -c lab-server:20408 -n bench-pc-1 exporter.yaml",
     "the board's host, with a Nucleo on USB; " + _LAB, _FARM_LAB),
    ("docs/guide/board-farm.md", "labgrid-client -x lab-server:20408 -p nucleo-1 create", _LAB, _FARM_PLACES),
    ("docs/guide/board-farm.md", "labgrid-client -x lab-server:20408 -p nucleo-1 add-match 'bench-pc-1/nucleo-1/*'",
     _LAB, _FARM_PLACES),
    ("docs/guide/board-farm.md", "labgrid-client -x lab-server:20408 -p nucleo-1 set-tags target=nucleo_f446re",
     _LAB, _FARM_PLACES),
    ("hil/README.md", "python -m pytest hil -q", "the HIL suite: part of every `python -m pytest -q` run", _SUITE),
    ("hil/README.md", "python -m pytest hil -q --hil-target qemu-m4", "a part of the default HIL run", _SUITE),
    ("hil/README.md", "python -m pytest hil -q --hil-target qemu-m33,qemu-m55",
     "every HIL test on two more cores (minutes); the default run gives them the core device checks and the "
     "variant comparison", _SUITE),
]


# ------------------------------------------------------------------------------------------------ parsing
@dataclass
class Command:
    doc: str          # path relative to the checkout
    line: int         # line of the document where the command starts
    kind: str         # "sh" or "python"
    text: str         # as written (continuations and here-documents joined with newlines)
    block: int = 0    # the fenced block it is in (numbered over all documents)

    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def documents() -> list[Path]:
    """README.md first (its quickstart makes veh.json), then docs/ in path order, then hil/README.md."""
    return [README, *sorted((REPO / "docs").rglob("*.md")), REPO / "hil" / "README.md"]


_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_ASSIGN = re.compile(r"^[A-Za-z_]\w*=\S*$")


def _shell_commands(block: str, first_line: int, doc: str, number: int) -> list[Command]:
    commands, lines, i = [], block.split("\n"), 0
    while i < len(lines):
        start, line = i, lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\") and i < len(lines):
            line += "\n" + lines[i]
            i += 1
        heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
        if heredoc:
            while i < len(lines):
                line += "\n" + lines[i]
                i += 1
                if lines[i - 1].strip() == heredoc.group(1):
                    break
        commands.append(Command(doc, first_line + start, "sh", line, number))
    return commands


def documented_commands() -> list[Command]:
    commands, number = [], 0
    for path in documents():
        text, doc = path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix()
        for m in _FENCE.finditer(text):
            number += 1
            first = text.count("\n", 0, m.start(2)) + 1
            if m.group(1) == "sh":
                commands += _shell_commands(m.group(2), first, doc, number)
            elif m.group(1) == "python":
                commands.append(Command(doc, first, "python", m.group(2), number))
    return commands


def _flat(text: str) -> str:
    return " ".join(text.replace("\\\n", " ").split())


def _bare(text: str) -> str:
    """The command without its trailing comment, words normalised (for matching the tables)."""
    try:
        return shlex.join(shlex.split(text.replace("\\\n", " "), comments=True))
    except ValueError:                                  # a here-document's text is not shell words
        return _flat(text)


def _same(cmd: Command, doc: str, text: str) -> bool:
    return cmd.doc == doc and _bare(cmd.text) == _bare(text)


def _excluded(cmd: Command):
    return next((e for e in EXCLUDED if _same(cmd, e[0], e[1])), None)


def _offline(cmd: Command):
    return next((o for o in OFFLINE if cmd.kind == "sh" and re.search(o[0], _flat(cmd.text))), None)


def _pytest_block(cmd: Command):
    return next((p for p in PYTEST_BLOCKS if p[0] == cmd.doc and cmd.kind == "python"
                 and cmd.text.startswith(p[1])), None)


def _substituted(cmd: Command) -> str:
    text = cmd.text
    for doc, marker, old, new in SUBSTITUTIONS:
        if doc == cmd.doc and marker in text:
            assert old in text, f"{cmd.where()}: substitution {old!r} -> {new!r} no longer applies"
            text = text.replace(old, new)
    return text


def _covered_by_test_api_doc(cmd: Command) -> bool:
    return cmd.doc == "docs/api.md" and cmd.kind == "python"


# ------------------------------------------------------------------------------------------------ running
def _env(bin_dir: Path) -> dict[str, str]:
    """The environment of the commands: `python` is this interpreter, the checkout first on PYTHONPATH."""
    bin_dir.mkdir()
    for name in ("python", "python3"):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTEST_ADDOPTS"] = "-p no:cacheprovider"
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _run(cmd: Command, work: Path, variables: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """(exit status, output, what was run) of one documented command."""
    prelude = "\n".join(variables)
    if cmd.kind == "python":
        script = work / f"doc_{Path(cmd.doc).stem}_{cmd.line}.py"
        pytest_block = _pytest_block(cmd)
        if pytest_block:
            script = work / f"test_doc_{Path(cmd.doc).stem.replace('-', '_')}_{cmd.line}.py"
            shell = f"{prelude}\npytest -q {script.name} {pytest_block[2]}"
        else:
            shell = f"python {script.name}"
        script.write_text(cmd.text, encoding="utf-8")
    else:
        shell = f"{prelude}\n{_substituted(cmd)}"
    cwd = REPO if any(re.search(p, _flat(cmd.text)) for p in IN_CHECKOUT) else work
    run_env = {**env, **OFFLINE_ENV} if _offline(cmd) else env
    proc = subprocess.run(["bash", "-c", shell], cwd=cwd, env=run_env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout + proc.stderr, shell


def _run_commands(cmds: list[Command], work: Path, env: dict[str, str], variables: list[str],
                  skip: set[int]) -> tuple[list[str], list[str], dict]:
    """Run commands in order in WORK: (failures, log lines, counts)."""
    variables, failures, log = list(variables), [], []
    counts = {"ran": 0, "offline": 0, "excluded": 0, "elsewhere": 0, "twice": 0}
    for cmd in cmds:
        if cmd.kind == "sh" and _ASSIGN.match(cmd.text):
            variables.append(cmd.text)                        # D=../shared/datasets: for the rest of the doc
            continue
        if _excluded(cmd):
            counts["excluded"] += 1
            continue
        if _covered_by_test_api_doc(cmd):
            counts["elsewhere"] += 1
            continue
        if id(cmd) in skip:
            counts["twice"] += 1
            continue
        if cmd.kind == "sh" and re.match(NEVER_RUN, cmd.text):
            failures.append(f"{cmd.where()}: {_flat(cmd.text)!r} changes the machine: list it in EXCLUDED")
            continue
        t0 = time.monotonic()
        code, output, shell = _run(cmd, work, variables, env)
        offline = _offline(cmd)
        expected = offline[1] if offline else 0
        problems = []
        if code != expected:
            problems.append(f"exit status {code}, expected {expected}")
        if offline and not re.search(offline[2], output):
            problems.append(f"output does not match {offline[2]!r}")
        if "Traceback (most recent call last)" in output and not offline and "pytest" not in shell:
            problems.append("a traceback")
        if problems:
            failures.append(f"{cmd.where()}: {'; '.join(problems)}\n$ {shell.strip()}\n{output[-2000:]}")
        counts["offline" if offline else "ran"] += 1
        log.append(f"{time.monotonic() - t0:6.1f} s  {cmd.where():38s} {_flat(cmd.text)[:90]}")
    return failures, log, counts


def _documented_twice(commands: list[Command]) -> set[int]:
    """Commands documented again later with the same text and the same variables: run once."""
    seen, twice, variables = set(), set(), {}
    for cmd in commands:
        if cmd.kind == "sh" and _ASSIGN.match(cmd.text):
            name, _, value = cmd.text.partition("=")
            variables.setdefault(cmd.doc, {})[name] = value
            continue
        used = {n: v for n, v in variables.get(cmd.doc, {}).items() if re.search(rf"\${{?{n}\b", cmd.text)}
        key = (cmd.kind, _bare(cmd.text), tuple(sorted(used.items())))
        if key in seen:
            twice.add(id(cmd))
        seen.add(key)
    return twice


def _weight(cmds: list[Command]) -> int:
    """A rough cost, to start the longest blocks first."""
    return sum(5 if re.search(r"pytest|qemu|compare|hil\.models|--train|treegen cv", c.text) else 1 for c in cmds)


def test_every_documented_command_runs(tmp_path):
    """README.md's commands first, in order, in one folder (its quickstart writes veh.json); then every
    other block, two at a time, each in its own folder holding a copy of README's files (so a block may
    use the quickstart's files and the variables set earlier in its document, not another block's files)."""
    assert (SHARED / "datasets").is_dir(), f"the shared datasets are needed beside the checkout: {SHARED}"
    commands, env, started = documented_commands(), _env(tmp_path / "bin"), time.monotonic()
    twice = _documented_twice(commands)

    def folder(name: str) -> Path:
        base = tmp_path / name
        (base / "work").mkdir(parents=True)
        (base / "shared").symlink_to(SHARED, target_is_directory=True)      # ../shared, as in the checkout
        return base / "work"

    readme = folder("README")
    results = {-1: _run_commands([c for c in commands if c.doc == "README.md"], readme, env, [], twice)}
    blocks: dict[int, list[Command]] = {}
    for cmd in commands:
        if cmd.doc != "README.md":
            blocks.setdefault(cmd.block, []).append(cmd)

    def run(number: int):
        cmds = blocks[number]
        earlier = [c.text for c in commands if c.doc == cmds[0].doc and c.block < number
                   and c.kind == "sh" and _ASSIGN.match(c.text)]
        if all(_excluded(c) or _covered_by_test_api_doc(c) or id(c) in twice or _ASSIGN.match(c.text)
               for c in cmds):
            return number, _run_commands(cmds, tmp_path, env, earlier, twice)      # nothing to run: no folder
        work = folder(f"block{number}")
        for f in readme.iterdir():
            if f.is_file():
                shutil.copy2(f, work / f.name)
        return number, _run_commands(cmds, work, env, earlier, twice)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results.update(pool.map(run, sorted(blocks, key=lambda n: -_weight(blocks[n]))))
    failures, totals = [], {}
    for number in sorted(results):
        block_failures, log, counts = results[number]
        failures += block_failures
        if log:
            print("\n".join(log))
        for k, v in counts.items():
            totals[k] = totals.get(k, 0) + v
    print(f"documented commands: {totals['ran']} ran, {totals['offline']} checked offline (no board), "
          f"{totals['twice']} documented twice (ran once), {totals['excluded']} excluded (EXCLUDED), "
          f"{totals['elsewhere']} run by tests/test_api_doc.py; {time.monotonic() - started:.0f} s")
    assert not failures, "\n\n".join(failures)


# ------------------------------------------------------------------------------------------------ tables
def test_the_tables_name_documented_commands():
    """No entry of a table may outlive the command it is about; evidence files hold their evidence."""
    commands = documented_commands()
    for doc, text, reason, evidence in EXCLUDED:
        assert reason and any(_same(c, doc, text) for c in commands), (doc, text)
        if evidence:
            assert evidence[1] in (REPO / evidence[0]).read_text(encoding="utf-8"), evidence
        for script in re.findall(r"\bbench/\S+\.(?:py|sh)", text):
            assert (REPO / script).is_file(), script
    for doc, marker, old, new in SUBSTITUTIONS:
        hits = [c for c in commands if c.doc == doc and marker in c.text and not _excluded(c)]
        assert len(hits) == 1 and old in hits[0].text and old != new, (doc, marker, old, len(hits))
    for pattern, _code, _text, reason in OFFLINE:
        assert reason and any(_offline(c) and re.search(pattern, _flat(c.text)) for c in commands), pattern
    for doc, first, _args in PYTEST_BLOCKS:
        assert any(_pytest_block(c) for c in commands if c.doc == doc and c.text.startswith(first)), (doc, first)
    for pattern in IN_CHECKOUT:
        assert any(re.search(pattern, _flat(c.text)) for c in commands), pattern
    for c in commands:
        if c.kind == "sh" and re.match(NEVER_RUN, c.text):
            assert _excluded(c), f"{c.where()}: {_flat(c.text)!r} changes the machine: list it in EXCLUDED"


def test_api_doc_examples_are_the_ones_run_by_test_api_doc():
    spec = importlib.util.spec_from_file_location("_test_api_doc", REPO / "tests" / "test_api_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ours = [c.text for c in documented_commands() if _covered_by_test_api_doc(c)]
    assert ours and module.DOC == REPO / "docs" / "api.md" and module._examples() == ours


def test_main_job_commands_are_the_quickstarts():
    """README's main job is excluded above because it installs; what it runs is the quickstart's commands."""
    job = [line.split()[1] for line in (REPO / "scripts" / "main_job.sh").read_text().splitlines()
           if line.startswith("treegen ")]
    quick = {_flat(c.text).split()[1] for c in documented_commands()
             if c.doc == "README.md" and c.kind == "sh" and c.text.startswith("treegen ")}
    assert job and set(job) <= quick, (job, quick)


# ------------------------------------------------------------------------------------------------ links
def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces -> hyphens."""
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_links_between_the_documents_resolve():
    broken = []
    for path in documents():
        text = _FENCE.sub("", path.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            rel = dest.relative_to(REPO).as_posix() if dest.is_relative_to(REPO) else str(dest)
            if not dest.exists():
                if rel not in NOT_YET_WRITTEN:
                    broken.append(f"{path.relative_to(REPO)}: {target} (no such file)")
                continue
            if anchor and anchor not in _anchors(dest):
                broken.append(f"{path.relative_to(REPO)}: {target} (no heading #{anchor})")
    assert not broken, "\n".join(broken)


def test_readme_is_a_front_page():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 220
