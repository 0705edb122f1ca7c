"""Host-compiled generated C == the Python fixed-point model (``treegen.quantize``), bit for bit.

For each layout (table, unrolled) and each variant (scalar, dsp — the DSP variant runs its portable
emulation on the host) the same suite of random trees is exported, compiled with the strict flags
plus UBSan (any signed overflow aborts the run), and run by one driver process per model
(``tests/c/tg_driver.c``: binary int16 rows in, one class byte per row out). Trees: axis and oblique,
1, 3, 8, 11 and 60 features, int32 and int64 accumulators, exact and inexact coefficients, a large
tree (int16_t child references), ensembles with a single-leaf member. Rows: uniform random, all-zero,
all-32767, 0/32767 mixes, and rows at and one LSB either side of every threshold (oblique: solved
so that acc == threshold exactly where the integers allow). At least 100,000 rows per layout and
variant, compared with exact equality.

The float32 export and the raw-input (float scaling) wrapper are checked against their documented
tolerances at the end.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from export_models import agreement_rows, build_driver, make_model, random_tree, run_driver, threshold_hits

from treegen.export import export_model, predict_fixed
from treegen.quantize import quantize_model
from treegen.scaling import InputScaling

UBSAN = ("-O2", "-fsanitize=undefined", "-fno-sanitize-recover=all")

# (n_features, tree modes (one per ensemble member), internal nodes per tree, seed)
SUITE = [
    (1, ["axis"], 12, 1),
    (3, ["axis"], 15, 2),
    (8, ["axis"], 20, 3),
    (11, ["axis"], 200, 4),     # > 127 internal nodes: int16_t child references
    (60, ["axis"], 25, 5),
    (3, ["efti"], 12, 6),
    (8, ["efti"], 15, 7),
    (11, ["efti"], 15, 8),
    (60, ["efti"], 12, 9),
    (3, ["pair"], 12, 10),      # int32 accumulator
    (11, ["pair"], 15, 11),
    (3, ["dense"], 10, 12),     # int64 accumulator, |acc| bound > 2^31
    (60, ["dense"], 10, 13),
    (8, ["float"], 15, 14),     # inexact coefficients
    (11, ["mixed"], 15, 15),    # one-term and all-zero oblique nodes
    (8, ["axis", "efti", "pair"], 10, 16),
    (3, ["leaf", "axis", "efti", "dense"], 8, 17),
]


def _model(n_features: int, modes: list, n_internal: int, seed: int):
    rng = np.random.default_rng(seed)
    n_classes = 4
    trees = [random_tree(rng, n_features, n_classes, 0 if m == "leaf" else n_internal,
                         "axis" if m == "leaf" else m) for m in modes]
    return make_model(trees, n_features, n_classes, dataset=f"m{seed}.csv"), rng


@pytest.fixture(scope="module")
def suite():
    cases = []
    for n_features, modes, n_internal, seed in SUITE:
        model, rng = _model(n_features, modes, n_internal, seed)
        qtrees = quantize_model(model)
        X = agreement_rows(qtrees, n_features, rng)
        expected = predict_fixed(qtrees, X, model.n_classes)
        cases.append({"model": model, "qtrees": qtrees, "X": X, "expected": expected, "seed": seed})
    return cases


def test_suite_covers_what_it_claims(suite):
    kinds = {qt.kind for c in suite for qt in c["qtrees"]}
    assert kinds == {"axis", "oblique"}
    acc = {qt.acc_bits for c in suite for qt in c["qtrees"] if qt.kind == "oblique"}
    assert acc == {32, 64}
    assert {c["model"].n_features for c in suite} >= {1, 3, 8, 11, 60}
    assert any(not qt.exact for c in suite for qt in c["qtrees"])
    assert any(qt.root < 0 for c in suite for qt in c["qtrees"])  # single-leaf tree
    assert sum(c["X"].shape[0] for c in suite) >= 100_000
    # every case meets thresholds exactly on the rows' own paths, oblique ones included
    for c in suite:
        hits = sum(threshold_hits(qt, c["X"]) for qt in c["qtrees"] if qt.n_internal)
        assert hits > 0, f"seed {c['seed']}: no row meets a threshold exactly"
    oblique_hits = sum(threshold_hits(qt, c["X"]) for c in suite for qt in c["qtrees"]
                       if qt.kind == "oblique" and qt.exact and np.count_nonzero(qt.weights) > 0)
    assert oblique_hits >= 200


def _check_case(case: dict, layout: str, variant: str, work) -> int:
    model = case["model"]
    rep = export_model(model, work, target="cortex-m4", layout=layout, variant=variant, measure=False)
    assert rep.variant == variant
    exe = build_driver(work, rep.name, extra=UBSAN)
    got = run_driver(exe, case["X"], work)
    expected = case["expected"]
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, (f"seed {case['seed']} ({layout}, {variant}): {bad.size} of {expected.size} rows differ; "
                           f"first row {case['X'][bad[0]].tolist()}: C {got[bad[0]]}, Python {expected[bad[0]]}")
    return int(expected.size)


@pytest.mark.parametrize("variant", ["scalar", "dsp"])
@pytest.mark.parametrize("layout", ["table", "unrolled"])
def test_c_equals_python_fixed_point(suite, layout, variant, tmp_path):
    dirs = [tmp_path / f"case{k}" for k in range(len(suite))]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = list(pool.map(lambda a: _check_case(a[0], layout, variant, a[1]), zip(suite, dirs)))
    assert sum(counts) >= 100_000


# ---------------------------------------------------------------------- float paths (tolerances)
@pytest.mark.parametrize("layout", ["table", "unrolled"])
def test_f32_export_agrees_with_the_float_model(layout, tmp_path):
    """f32: float32 arithmetic. The documented tolerance is >= 99.5 % of random rows (only rows within
    float32 rounding of a threshold can differ); the axis tree here agrees on every row."""
    for n_features, modes, seed, floor_pct in [(3, ["axis"], 21, 100.0), (8, ["efti"], 22, 99.5),
                                               (11, ["float"], 23, 99.5), (60, ["efti"], 24, 99.5),
                                               (8, ["axis", "efti", "pair"], 25, 99.5)]:
        model, rng = _model(n_features, modes, 15, seed)
        X = rng.integers(0, 32768, (20_000, n_features)).astype(np.float32)
        work = tmp_path / f"s{seed}"
        rep = export_model(model, work, target="cortex-m4", layout=layout, dtype="f32", measure=False)
        got = run_driver(build_driver(work, rep.name, float_input=True, extra=UBSAN), X, work)
        want = model.predict_index(X.astype(np.float64))
        agree = 100.0 * float(np.mean(got == want))
        assert agree >= floor_pct, f"seed {seed}: f32 agreement {agree:.3f} %"


def test_f32_layouts_are_identical(tmp_path):
    model, rng = _model(11, ["efti", "float"], 20, 31)
    X = rng.integers(0, 32768, (20_000, 11)).astype(np.float32)
    out = {}
    for layout in ("table", "unrolled"):
        work = tmp_path / layout
        rep = export_model(model, work, target="cortex-m4", layout=layout, dtype="f32", measure=False)
        out[layout] = run_driver(build_driver(work, rep.name, float_input=True), X, work)
    assert np.array_equal(out["table"], out["unrolled"])


def test_raw_input_wrapper(tmp_path):
    """tg_<name>_predict(raw floats): exact for q15-scaled data; with min-max scaling (float32 in C,
    float64 in Python) a row can differ only where a value lies within float32 rounding of a .5 step."""
    rng = np.random.default_rng(41)
    # q15 scaling: raw values are the Q15 integers themselves
    model, _ = _model(8, ["efti"], 15, 42)
    X = rng.integers(0, 32768, (20_000, 8)).astype(np.float32)
    rep = export_model(model, tmp_path / "q", target="native", measure=False)
    got = run_driver(build_driver(tmp_path / "q", rep.name, float_input=True, predict=f"tg_{rep.name}_predict"),
                     X, tmp_path / "q")
    assert np.array_equal(got, predict_fixed(quantize_model(model), model.scaling.to_q15(X), model.n_classes))
    # min-max scaling of data in physical units (including out-of-range values that saturate)
    lo = rng.uniform(-50, 50, 8)
    span = rng.uniform(0.5, 300, 8)
    train = lo + span * rng.random((500, 8))
    scaling = InputScaling.fit(train, "minmax")
    tree_model, _ = _model(8, ["efti"], 15, 43)
    mm = make_model(tree_model.trees, 8, 4, scaling=scaling, dataset="mm.csv")
    X = (lo + span * rng.uniform(-0.1, 1.1, (20_000, 8))).astype(np.float32)
    rep = export_model(mm, tmp_path / "m", target="native", measure=False)
    got = run_driver(build_driver(tmp_path / "m", rep.name, float_input=True, predict=f"tg_{rep.name}_predict"),
                     X, tmp_path / "m")
    want = predict_fixed(quantize_model(mm), scaling.to_q15(X.astype(np.float64)), mm.n_classes)
    assert float(np.mean(got == want)) >= 0.999
