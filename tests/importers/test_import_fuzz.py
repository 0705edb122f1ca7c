"""Fuzzing ``treegen import`` in CI (issue #33): a bounded, seeded number of structure-aware mutations of
real model files per format (XGBoost JSON and UBJSON, LightGBM text, ONNX, scikit-learn pickles with
--trust-pickle) plus random bytes, each run through the CLI in a worker process (see
``import_fuzz.py``): every case must end refused with one line, or imported as a model that predicts as
its library. ``bench/fuzz_import.py`` runs the same engine for minutes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")
pytest.importorskip("onnxruntime")
pytest.importorskip("skl2onnx")

import import_fuzz  # noqa: E402

CASES_PER_FORMAT = 15     # 90 cases: about a minute on one idle core
SEED = 20261127


def test_import_fuzz_every_format(tmp_path):
    counts, bad = import_fuzz.fuzz(import_fuzz.FORMATS, CASES_PER_FORMAT, SEED, tmp_path)
    report = "\n".join(f"{b['format']} case {b['case']}: {b['outcome']}: {b['detail'][:500]}" for b in bad)
    assert not bad, report
    for fmt in import_fuzz.FORMATS:
        assert sum(counts[fmt].values()) == CASES_PER_FORMAT, counts
        assert counts[fmt].get("refused", 0) > 0, counts      # the mutations reach the checks
    # some mutated files are still valid models: they must predict as their library
    assert sum(counts[f].get("accepted-same", 0) for f in import_fuzz.FORMATS) >= 5, counts


def test_import_fuzz_cases_in_a_real_process(tmp_path):
    """One mutated file per format through ``python -m treegen import`` itself: exit 0, or exit 2 with
    one line, and never a traceback on stderr."""
    import random

    seeds = import_fuzz.make_seeds(tmp_path / "seeds")
    rng = random.Random(SEED)
    for fmt in import_fuzz.FORMATS:
        for i in range(1):
            path = import_fuzz.make_case(fmt, seeds, rng, tmp_path, i)
            proc = subprocess.run([sys.executable, "-m", "treegen", "import", str(path), "--trust-pickle", "-o",
                                   str(Path(str(path) + ".model.json"))], capture_output=True, text=True,
                                  timeout=300)
            assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
            if proc.returncode != 0:
                lines = proc.stderr.splitlines()
                assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("treegen: error: "), \
                    (fmt, i, proc.returncode, proc.stderr[-3000:])


def test_files_the_long_runs_found(tmp_path):
    """Every file a long run of ``bench/fuzz_import.py`` failed on (tests/importers/fuzz_found: crashes of
    XGBoost and LightGBM, tracebacks, models that differed from their library) now ends refused with one
    line or imported as a model that predicts as its library."""
    import shutil

    found = []
    for p in sorted((Path(__file__).parent / "fuzz_found").iterdir()):   # copies: the worker writes beside them
        found.append(tmp_path / p.name)
        shutil.copyfile(p, found[-1])
    assert len(found) >= 20
    runner = import_fuzz.Runner()
    try:
        results = {p.name: runner.run(p) for p in found}
    finally:
        runner.close()
    bad = {k: r for k, r in results.items() if r["outcome"] not in ("refused", "accepted-same")}
    assert not bad, bad
