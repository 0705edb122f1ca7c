"""``treegen tune`` end to end on the native harness (costs measured by HIL runs of the host build; the
CV tasks on a local Dask cluster of one worker): same seed, same front; the budget is respected;
nothing fits -> one line and exit 2; a rerun starts no cluster and no HIL run (results + cost cache)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import DATASETS, run_cli
from treegen.core.data import load_csv
from treegen.device import tune_cost
from treegen.device.tune import tune

ARGS = dict(algos=["cart", "id3"], per_algo=3, workers=1)
#: what the front and its points are, minus the host's wall-clock nanoseconds (not a repeatable figure)
STABLE = ("name", "layout", "variant", "accuracy", "n_folds", "leaves", "flash_bytes", "ram_bytes", "model_hash")


def _stable(result):
    return ([{k: p[k] for k in STABLE} for p in result["points"]], result["search"]["rungs"],
            [{k: result["points"][i][k] for k in STABLE} for i in result["front"]])


@pytest.fixture(scope="module")
def irs():
    ds = load_csv(DATASETS / "irs.csv.gz")
    return ds.X, ds.labels


@pytest.fixture(scope="module")
def first(irs, tmp_path_factory):
    d = tmp_path_factory.mktemp("tune")
    res = tune(*irs, "native", seed=5, results=d / "r.tasks.jsonl", costs=d / "r.costs.jsonl", **ARGS)
    return d, res


def test_same_seed_same_front(irs, first, tmp_path):
    _, a = first
    b = tune(*irs, "native", seed=5, results=tmp_path / "b.jsonl", costs=tmp_path / "c.jsonl", confirm=False, **ARGS)
    assert _stable(a) == _stable(b)
    assert b["hil_runs"] == len(b["points"])          # fresh cache: every point measured once (host: no baseline)
    assert a["front"] and all(a["points"][i]["flash_bytes"] > 0 for i in a["front"])


def test_a_rerun_uses_the_results_and_the_cost_cache(irs, first, monkeypatch):
    d, a = first

    def no_cluster(*args, **kw):
        raise AssertionError("a cluster was started")
    monkeypatch.setattr("treegen.learn.compare.dask_client", no_cluster)
    b = tune(*irs, "native", seed=5, results=d / "r.tasks.jsonl", costs=d / "r.costs.jsonl", confirm=False, **ARGS)
    assert b["hil_runs"] == 0 and _stable(a) == _stable(b)


def test_the_budget_is_respected(irs, first):
    d, a = first
    flashes = sorted({p["flash_bytes"] for p in a["points"]})
    limit = flashes[len(flashes) // 2]
    r = tune(*irs, "native", seed=5, results=d / "r.tasks.jsonl", costs=d / "r.costs.jsonl", max_flash=limit,
             max_ram=1024, **ARGS)
    c = r["chosen"]
    assert c["flash_bytes"] <= limit and c["fits"]
    fitting = [p for p in r["points"] if p["flash_bytes"] <= limit]
    assert c["accuracy"] == max(p["accuracy"] for p in fitting)
    assert all(p["fits"] == (p["flash_bytes"] <= limit and p["ram_bytes"] <= 1024) for p in r["points"])
    conf = r["confirmation"]
    assert conf["ok"] and conf["mismatches"] == 0 and conf["rows"] == 150 and conf["flash_bytes"] <= limit


def test_nothing_fits_is_one_line_and_exit_2(first, capsys, tmp_path):
    d, a = first
    smallest = min(p["flash_bytes"] for p in a["points"])
    argv = ["tune", DATASETS / "irs.csv.gz", "--target", "native", "--algos", "cart,id3", "--candidates", "3",
            "--seed", "5", "--workers", "1", "--results", d / "r.tasks.jsonl", "--max-flash", "100",
            "-o", tmp_path / "best.json", "--json", tmp_path / "t.json", "-q"]
    code, out, err = run_cli(capsys, [str(x) for x in argv])
    assert code == 2 and err.strip().splitlines() == [
        f"treegen: error: the smallest model needs {smallest} B of flash, budget 100 B"]
    assert not (tmp_path / "best.json").exists()
    assert json.loads((tmp_path / "t.json").read_text())["chosen"] is None     # the front is still written
    assert "CV acc %" in out


def test_the_cli_saves_and_exports_the_chosen_model(first, capsys, tmp_path):
    d, a = first
    argv = ["tune", DATASETS / "irs.csv.gz", "--target", "native", "--algos", "cart,id3", "--candidates", "3",
            "--seed", "5", "--results", d / "r.tasks.jsonl", "--max-flash", "1KiB", "-o", tmp_path / "best.json",
            "--export", tmp_path / "lib", "-q"]
    code, out, err = run_cli(capsys, [str(x) for x in argv])
    assert code == 0, err
    saved = json.loads((tmp_path / "best.json").read_text())
    assert saved["metadata"]["tune"]["target"] == "native"
    assert (tmp_path / "lib").is_dir() and any(p.suffix == ".c" for p in (tmp_path / "lib").iterdir())
    assert "best: " in out and "HIL on native: PASS" in out


@pytest.mark.parametrize("argv, match", [
    (["--max-flash", "1 parsec"], "a size expected"),
    (["--max-latency-us", "1", "--max-instructions", "5"], "not allowed with argument"),
    (["--max-instructions", "50"], "native times inferences in nanoseconds"),
    (["--target", "nucleo_f446re"], "emulated target or native"),
])
def test_bad_input_is_one_line(capsys, tmp_path, argv, match):
    base = ["tune", str(DATASETS / "irs.csv.gz"), "--target", "native", "-o", str(tmp_path / "b.json"), "-q"]
    code, out, err = run_cli(capsys, base + argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and match in err, err


def test_latency_conversion_and_size_parsing():
    from treegen.cli.tune import size_bytes
    assert tune_cost.latency_us(50, "instructions", 25_000_000) == pytest.approx(2.0)
    assert tune_cost.latency_us(1500, "nanoseconds", 1) == pytest.approx(1.5)
    assert [size_bytes(t) for t in ("1KiB", "1.5 KiB", "8K", "2048", "1MiB")] == [1024, 1536, 8192, 2048, 1 << 20]
