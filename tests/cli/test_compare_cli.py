"""`treegen compare` (and `cv --scheduler`) end to end: a real Dask scheduler and two workers started as
separate processes (`python -m dask scheduler`, `python -m dask worker`) on 127.0.0.1, against the
local cluster with the same seed; a worker killed mid-run; bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DATASETS, REPO, assert_user_error, process_group_gone, run_cli
from treegen.learn.compare import strip_timing

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
# EFTI on the Python engine: slow enough per task that a worker can be killed while it works
PARAMS = {"efti": {"max_iter": 1500, "engine": "python", "oversize_weight": 0.05}, "cart": {"ccp_alpha": 0.01}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def treegen(*argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "treegen", *map(str, argv)], env=ENV, capture_output=True,
                          text=True, timeout=300, **kw)


def compare_args(tmp: Path, out: str) -> list:
    params = tmp / "params.json"
    params.write_text(json.dumps(PARAMS))
    return ["compare", "irs", "bcw", "--data-dir", DATASETS, "--algos", "efti,cart", "--params", params,
            "--folds", 3, "--repeats", 2, "--seed", 3, "--json", tmp / f"{out}.json", "-q"]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(address, {worker name: process}) of a scheduler and two single-threaded workers."""
    from distributed import Client

    log = tmp_path_factory.mktemp("dask")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], env=ENV, stdout=subprocess.DEVNULL,
                              stderr=open(log / "scheduler.log", "w"), start_new_session=True)]
    workers = {}
    try:
        for name in ("w1", "w2"):
            workers[name] = start_worker(address, name, log / f"{name}.log")
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address, workers
    finally:
        for p in [*workers.values(), *procs]:      # a killed worker's replacement too
            stop(p)


def start_worker(address: str, name: str, log: Path) -> subprocess.Popen:
    """A single-threaded `dask worker` process named ``name`` for the scheduler at ``address``."""
    return subprocess.Popen([sys.executable, "-m", "dask", "worker", address, "--host", "127.0.0.1", "--nthreads",
                             "1", "--no-nanny", "--no-dashboard", "--name", name, "--death-timeout", "60"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=open(log, "w"), start_new_session=True)


def run_killing_a_worker(cluster, args: list, results: Path,
                         log: Path) -> tuple[subprocess.Popen, str, str, str | None]:
    """Run ``treegen *args`` on the cluster and SIGKILL one of its two workers while both hold treegen
    tasks and at least 2 tasks are in the results file; then start a fresh worker of the same name (its
    log ``log``) so that the next test has two again. Returns (process, stdout, stderr, killed name);
    the killed name is None when the run ended before a worker could be killed mid-task."""
    from distributed import Client

    address, workers = cluster
    run = subprocess.Popen([sys.executable, "-m", "treegen", *map(str, args)], env=ENV, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    killed = None
    try:
        with Client(address, timeout="30s") as client:
            deadline = time.monotonic() + 120
            while killed is None and time.monotonic() < deadline and run.poll() is None:
                names = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
                busy = {a: keys for a, keys in client.processing().items()
                        if any(str(k).startswith("treegen-task-") for k in keys)}
                done = len(results.read_text().splitlines()) if results.exists() else 0
                if done >= 2 and len(busy) == 2:   # both working, some tasks finished: kill one mid-task
                    killed = names[next(iter(busy))]
                    workers[killed].kill()
                    workers[killed].wait(timeout=10)
                    break
                time.sleep(0.02)
            out, err = run.communicate(timeout=300)
            if killed is not None:
                deadline = time.monotonic() + 30   # the scheduler forgets the dead worker's name first
                while killed in {w["name"] for w in client.scheduler_info()["workers"].values()} \
                        and time.monotonic() < deadline:
                    time.sleep(0.1)
                workers[killed] = start_worker(address, killed, log)
                client.wait_for_workers(2, timeout=60)
    finally:
        stop(run)
    return run, out, err, killed


def test_compare_on_a_cluster_equals_local_and_survives_a_killed_worker(cluster, tmp_path):
    address, _ = cluster
    local = treegen(*compare_args(tmp_path, "local"), "--workers", 2)
    assert local.returncode == 0, local.stderr
    assert "**p = " in local.stdout and "average rank" in local.stdout

    args = compare_args(tmp_path, "remote") + ["--scheduler", address]
    run, out, err, killed = run_killing_a_worker(cluster, args, tmp_path / "remote.tasks.jsonl",
                                                 tmp_path / "worker.log")
    assert killed is not None, "the run ended before a worker could be killed mid-task"
    assert run.returncode == 0, err
    a = json.loads((tmp_path / "local.json").read_text())
    b = json.loads((tmp_path / "remote.json").read_text())
    assert a["n_tasks"] == b["n_tasks"] == 2 * 2 * 2 * 3 and b["n_tasks_run"] == b["n_tasks"]
    assert strip_timing(b["records"]) == strip_timing(a["records"])
    assert b["summary"]["scores"] == a["summary"]["scores"]
    assert b["summary"]["friedman"] == a["summary"]["friedman"]
    assert b["summary"]["wilcoxon"] == a["summary"]["wilcoxon"]
    lines = (tmp_path / "remote.tasks.jsonl").read_text().splitlines()
    assert len(lines) == b["n_tasks"], "every task recorded exactly once"

    # the same command again: everything comes from the results file
    again = treegen(*args)
    assert again.returncode == 0, again.stderr
    c = json.loads((tmp_path / "remote.json").read_text())
    assert c["n_tasks_run"] == 0 and c["records"] == b["records"]
    # the compute behind the table is kept: the tasks' own times, from the results file
    assert c["task_seconds"] == b["task_seconds"] == pytest.approx(
        sum(r["train_seconds"] + r.get("measure_seconds", 0.0) for r in b["records"]))
    assert b["task_seconds"] > 0
    assert f"times sum to {c['task_seconds']:.0f} s" in again.stdout
    assert f"{c['n_tasks']} tasks, all from the results file (none run now)" in again.stdout
    assert "wall time" not in again.stdout and c["cluster"].startswith("no cluster")


def test_tune_on_the_cluster_equals_local(cluster, tmp_path):
    """treegen tune's CV tasks on the running scheduler (compare's machinery): the same search and the
    same measured points as on a local cluster (native costs: all but the host's nanoseconds)."""
    address, _ = cluster
    base = ["tune", DATASETS / "irs.csv.gz", "--target", "native", "--algos", "cart,id3", "--candidates", "3",
            "--seed", "2", "-q"]
    runs = {}
    for name, where in (("local", ["--workers", 1]), ("remote", ["--scheduler", address])):
        done = treegen(*base, *where, "-o", tmp_path / f"{name}.json", "--json", tmp_path / f"{name}.tune.json")
        assert done.returncode == 0, done.stderr
        runs[name] = json.loads((tmp_path / f"{name}.tune.json").read_text())
    keep = ("name", "layout", "variant", "accuracy", "n_folds", "leaves", "flash_bytes", "ram_bytes", "model_hash")
    a, b = runs["local"], runs["remote"]
    assert a["search"]["rungs"] == b["search"]["rungs"]
    assert [{k: p[k] for k in keep} for p in a["points"]] == [{k: p[k] for k in keep} for p in b["points"]]
    assert a["chosen"]["name"] == b["chosen"]["name"] and b["confirmation"]["ok"]


def test_tune_on_a_cluster_survives_a_killed_worker(cluster, tmp_path):
    """A worker SIGKILLed while tune's CV tasks run changes nothing: the same rungs, points, front and
    chosen model (file, but for its training time) as the local run. GP (~0.5 s a task on irs) keeps tasks running
    long enough to kill one. The remote run is given a copy of the local run's cost cache (the host's
    nanoseconds differ from run to run): the CV tasks and the finalists' fits are redone on the cluster,
    and a cost is a cache hit only for the same model hash (no cost measured again = the same models)."""
    address, _ = cluster
    base = ["tune", DATASETS / "irs.csv.gz", "--target", "native", "--algos", "cart,gp", "--candidates", 1,
            "--seed", 5, "-q"]
    out = {name: (tmp_path / f"{name}.json", tmp_path / f"{name}.tune.json") for name in ("local", "remote")}
    local = treegen(*base, "--workers", 2, "-o", out["local"][0], "--json", out["local"][1])
    assert local.returncode == 0, local.stderr
    shutil.copy(tmp_path / "local.costs.jsonl", tmp_path / "remote.costs.jsonl")
    run, _, err, killed = run_killing_a_worker(
        cluster, [*base, "--scheduler", address, "-o", out["remote"][0], "--json", out["remote"][1]],
        tmp_path / "remote.tasks.jsonl", tmp_path / "worker.log")
    assert killed is not None, "the run ended before a worker could be killed mid-task"
    assert run.returncode == 0, err
    a, b = (json.loads(out[name][1].read_text()) for name in ("local", "remote"))
    assert b["search"] == a["search"] and len(b["search"]["rungs"]) == 3
    assert b["points"] == a["points"] and b["front"] == a["front"] and b["chosen"] == a["chosen"]
    assert b["hil_runs"] == 0 < a["hil_runs"]
    models = [json.loads(out[name][0].read_text()) for name in ("local", "remote")]
    for m in models:
        m["metadata"].pop("elapsed_s", None)           # GP's training wall time
    assert models[0] == models[1]
    keys = [json.loads(line)["key"] for line in (tmp_path / "remote.tasks.jsonl").read_text().splitlines()]
    # both candidates reach the last rung (2 x 5 folds), whose tasks include the earlier rungs'
    assert len(keys) == len(set(keys)) == 2 * 2 * 5, "every task recorded exactly once"


def test_cv_on_the_cluster_equals_local(cluster, tmp_path):
    from treegen.core.data import load_csv
    from treegen.learn.cv import cross_validate

    address, _ = cluster
    remote = treegen("cv", DATASETS / "bcw.csv.gz", "--algo", "cart", "--ccp-alpha", "0.01", "--folds", 3,
                     "--repeats", 2, "--seed", 4, "-q", "--scheduler", address, "--json", tmp_path / "remote.json")
    assert remote.returncode == 0, remote.stderr
    ds = load_csv(DATASETS / "bcw.csv.gz")
    a = cross_validate(ds.X, ds.labels, "cart", {"ccp_alpha": 0.01}, folds=3, repeats=2, seed=4, jobs=1)
    b = json.loads((tmp_path / "remote.json").read_text())
    strip = lambda r: [{k: v for k, v in f.items() if k != "train_seconds"} for f in r["folds"]]  # noqa: E731
    assert strip(a) == strip(b) and a["accuracy"] == b["accuracy"]


def test_ctrl_c_cancels_cleanly(tmp_path):
    """SIGINT to the whole process group (what Ctrl-C in a terminal does): exit 130, one line saying
    what was kept, the local cluster's worker processes gone."""
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from treegen.cli import main; sys.exit(main(sys.argv[1:]))")
    args = compare_args(tmp_path, "int") + ["--workers", 1]
    run = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], env=ENV, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    results = tmp_path / "int.tasks.jsonl"
    try:
        deadline = time.monotonic() + 120
        while run.poll() is None and time.monotonic() < deadline:
            if results.exists() and results.read_text().count("\n") >= 1:
                break
            time.sleep(0.05)
        assert run.poll() is None, "finished before it could be interrupted"
        os.killpg(run.pid, signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        stop(run)
    assert run.returncode == 130, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("treegen: interrupted: ") and "the same command resumes" in lines[0]
    kept = len(results.read_text().splitlines())
    assert 1 <= kept < 24 and f"{kept} of 24 tasks finished" in lines[0]
    assert process_group_gone(run.pid, 20), "processes of the interrupted run are still alive"


def test_unreachable_scheduler_is_one_line_within_10s(capsys, tmp_path):
    port = free_port()            # nothing listens there
    for argv in (compare_args(tmp_path, "x") + ["--scheduler", f"tcp://127.0.0.1:{port}"],
                 ["cv", DATASETS / "irs.csv.gz", "--algo", "cart", "--scheduler", f"127.0.0.1:{port}", "-q"]):
        t0 = time.monotonic()
        assert_user_error(capsys, argv, "cannot reach the Dask scheduler at")
        assert time.monotonic() - t0 < 10
    assert_user_error(capsys, ["cv", DATASETS / "irs.csv.gz", "--algo", "cart", "--scheduler", "tcp://nohost"],
                      "tcp://HOST:PORT")


def test_compare_bad_input(capsys, tmp_path):
    base = ["--folds", "3", "--json", tmp_path / "o.json"]
    assert_user_error(capsys, ["compare", "nosuch", "--data-dir", DATASETS, "--algos", "cart", *base],
                      "unknown dataset 'nosuch'")
    assert_user_error(capsys, ["compare", tmp_path / "nosuch.csv", "--algos", "cart", *base], "unknown dataset")
    assert_user_error(capsys, ["compare", "irs", "--data-dir", DATASETS, "--algos", "cart,c45", *base],
                      "unknown algorithm 'c45'")
    bad = tmp_path / "bad.json"
    bad.write_text('{"efti": {"max_iters": 10}}')
    assert_user_error(capsys, ["compare", "irs", "--data-dir", DATASETS, "--algos", "efti", "--params", bad, *base],
                      "has no option 'max_iters'")
    bad.write_text('{"efti": {"max_iter": -1}}')
    assert_user_error(capsys, ["compare", "irs", "--data-dir", DATASETS, "--algos", "efti", "--params", bad, *base],
                      "max_iter")
    bad.write_text("{efti")
    assert_user_error(capsys, ["compare", "irs", "--data-dir", DATASETS, "--algos", "efti", "--params", bad, *base],
                      "not valid JSON")
    toml = tmp_path / "p.toml"
    toml.write_text("[cart]\nccp_alpha = 0.01\n[efti]\nmax_iter = 10\n")
    assert_user_error(capsys, ["compare", "irs", "--data-dir", DATASETS, "--algos", "cart", "--params", toml, *base],
                      "parameters given for algorithm 'efti'")
    assert_user_error(capsys, ["compare", "irs", "--data-dir", DATASETS, "--algos", "cart", "--target", "nosuch",
                               *base], "nosuch")
    assert_user_error(capsys, ["compare", "irs", "--data-dir", DATASETS, "--algos", "cart", "--scheduler",
                               "tcp://127.0.0.1:1", "--workers", "2", *base], "--workers")
    assert_user_error(capsys, ["compare", "irs", "irs", "--data-dir", DATASETS, "--algos", "cart", *base],
                      "given twice")
    assert not (tmp_path / "o.json").exists()
    code, out, err = run_cli(capsys, ["compare", "--help"])
    assert code == 0 and "--scheduler" in out
