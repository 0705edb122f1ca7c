"""Host-compiled generated C == the Python fixed-point model (``treegen.emit.quantize``), bit for bit.

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

from treegen.core.scaling import InputScaling
from treegen.core.targets import get as get_target
from treegen.emit.check import predict_f32, predict_fixed
from treegen.emit.export import build_context, export_model
from treegen.emit.lower_f32 import _f32_axis_node, f32_axis_split, f32_key, q15_of_raw
from treegen.emit.lower_fixed import quantize_model

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
    target = "cortex-m55" if variant == "mve" else "cortex-m4"   # mve needs a Helium target
    rep = export_model(model, work, target=target, layout=layout, variant=variant, measure=False)
    assert rep.variant == variant
    exe = build_driver(work, rep.name, extra=UBSAN)
    got = run_driver(exe, case["X"], work)
    expected = case["expected"]
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, (f"seed {case['seed']} ({layout}, {variant}): {bad.size} of {expected.size} rows differ; "
                           f"first row {case['X'][bad[0]].tolist()}: C {got[bad[0]]}, Python {expected[bad[0]]}")
    return int(expected.size)


@pytest.mark.parametrize("variant", ["scalar", "dsp", "mve"])
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


# ---------------------------------------------------------------------- f32 axis trees: exact on raw inputs
F32 = np.float32
F32_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.finfo(F32).max, -np.finfo(F32).max, np.finfo(F32).tiny,
                        -np.finfo(F32).tiny, np.finfo(F32).smallest_subnormal, -np.finfo(F32).smallest_subnormal,
                        1.0, -1.0, 0.5, 32767.0, 32767.5, 32768.0, -0.5], dtype=F32)

# per-feature (offset, scale): the q15 identity, physical min-max ranges (wide, narrow, far from zero:
# there several Q15 steps fall between two adjacent float32 values), extreme scales, subnormal
# ranges, a constant feature (scale 0) and a negative scale (a decreasing map)
SCALINGS = [
    (0.0, 1.0 / 32768), (-12.5, (32767 / 32768) / 300.0), (0.125, (32767 / 32768) / 1e-3),
    (1.0e6, (32767 / 32768) / 0.5), (-3.0e7, (32767 / 32768) / 1.0e4), (1.0e-40, (32767 / 32768) / 1e-38),
    (5.0, 1e-30), (-1.0, 1e30), (2.5, 0.0), (100.0, -(32767 / 32768) / 40.0), (0.0, 1.0),
]


def _f32_window(t: np.float32, k: int = 48) -> np.ndarray:
    """The 2k + 1 float32 values around t (inclusive), both zeros and both infinities allowed."""
    out = [t]
    lo = hi = t
    for _ in range(k):
        lo, hi = np.nextafter(lo, F32(-np.inf)), np.nextafter(hi, F32(np.inf))
        out += [lo, hi]
    return np.array(out, dtype=F32)


def _random_f32(rng, n: int) -> np.ndarray:
    """Random float32 bit patterns (every exponent equally likely), NaNs dropped."""
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(F32)
    return x[~np.isnan(x)]


def test_f32_axis_thresholds_equal_the_q15_test_on_every_float32_input():
    """For every (offset, scale) above and many Q15 thresholds T: the raw-unit test chosen at export
    (key compare of the table layout, signed/unsigned bit compare of the unrolled layout) takes the
    Q15 model's branch, q(x) <= T, for the float32 values around t (where the branch changes), the
    special values and random float32 values of every magnitude; q as InputScaling.to_q15."""
    rng = np.random.default_rng(77)
    checked = 0
    for offset, scale in SCALINGS:
        sc = InputScaling(np.array([offset]), np.array([scale]))
        xs_random = np.concatenate([_random_f32(rng, 4000), F32_SPECIAL,
                                    (offset + rng.uniform(-0.2, 1.2, 2000) / (scale * 32768 if scale else 1)
                                     ).astype(F32)])
        for T in [-1, 0, 1, 2, 100, 12287, 16383, 16384, 32766, 32767, *rng.integers(0, 32767, 20).tolist()]:
            node = _f32_axis_node(0, 0, T, -1, -2, sc)
            op, t = f32_axis_split(offset, scale, T)
            xs = xs_random if t is None else np.concatenate([_f32_window(t), xs_random])
            xs = xs[~np.isnan(xs)]
            q = q15_of_raw(xs, offset, scale)
            finite = np.isfinite(xs)
            assert np.array_equal(q[finite], sc.to_q15(xs[finite].astype(np.float64)[:, None])[:, 0])
            want = np.where(q <= T, -1, -2)
            bits = xs.view(np.uint32).astype(np.int64)
            signed = np.where(bits >= 1 << 31, bits - (1 << 32), bits)
            table = np.where(f32_key(bits) <= node["key"], node["table_left"], node["table_right"])
            assert np.array_equal(table, want), (offset, scale, T, op, t)
            c_key = np.where(signed < 0, signed ^ 0x7FFFFFFF, signed)  # tg_<name>_key of the table layout
            assert np.array_equal(np.where(c_key <= node["skey"], node["table_left"], node["table_right"]), want)
            if node["always_left"] or node["always_right"]:
                unrolled = np.full(xs.size, node["left"] if node["always_left"] else node["right"])
            elif node["cmp"] == "s":
                unrolled = np.where(signed <= int(node["bits"], 16), node["left"], node["right"])
            else:
                unrolled = np.where(bits >= int(node["bits"], 16), node["left"], node["right"])
            assert np.array_equal(unrolled, want), (offset, scale, T, op, t)
            if t is not None:  # t is the last value of its side: the branch changes right after it
                nxt = np.nextafter(t, F32(np.inf))
                assert (q15_of_raw(t, offset, scale) <= T) != (q15_of_raw(nxt, offset, scale) <= T)
            checked += xs.size
    assert checked > 1_000_000


def _axis_raw_model(seed: int, n_internal: int = 40):
    """Random axis trees on 11 features, one per SCALINGS entry (all of them in one model)."""
    rng = np.random.default_rng(seed)
    nf = len(SCALINGS)
    scaling = InputScaling(np.array([o for o, _ in SCALINGS]), np.array([s for _, s in SCALINGS]))
    trees = [random_tree(rng, nf, 4, n_internal, "axis") for _ in range(3)]
    return make_model(trees[:1], nf, 4, scaling=scaling, dataset="raw.csv"), \
        make_model(trees, nf, 4, scaling=scaling, dataset="raw3.csv"), rng


def _raw_rows(model, rng, per_node: int = 12) -> np.ndarray:
    """float32 rows: random values in and beyond each feature's range, special values, and for every
    node of every tree rows with its feature set to the float32 values around its raw threshold."""
    nf = model.n_features
    off, sc = model.scaling.offset, model.scaling.scale
    span = np.where(sc != 0, 1.0 / np.where(sc != 0, np.abs(sc) * 32768, 1.0), 1.0)
    base = (off + span * rng.uniform(-0.3, 1.3, (3000, nf))).astype(F32)
    rows = [base, rng.choice(F32_SPECIAL, (500, nf))]
    for tree in model.trees:
        qt = quantize_model(make_model([tree], nf, model.n_classes, scaling=model.scaling))[0]
        for i in range(qt.n_internal):
            f = int(qt.feature[i])
            _, t = f32_axis_split(float(off[f]), float(sc[f]), int(qt.threshold[i]))
            if t is None:
                continue
            for v in _f32_window(t, 3):
                b = base[rng.choice(base.shape[0], per_node, replace=False)].copy()
                b[:, f] = v
                rows.append(b)
    return np.concatenate(rows).astype(F32)


@pytest.mark.parametrize("layout", ["table", "unrolled"])
def test_f32_axis_c_equals_the_q15_model_on_raw_inputs(layout, tmp_path):
    """The compiled f32 C (UBSan) on raw float32 rows == the Python Q15 model on the same rows scaled
    by InputScaling.to_q15, for rows at and around every raw threshold, +-0, +-inf, subnormals, huge
    values; == predict_f32 (the Python model of the f32 C) on every row, NaN rows included."""
    single, ensemble, rng = _axis_raw_model(51)
    for model in (single, ensemble):
        X = _raw_rows(model, rng)
        work = tmp_path / model.metadata["dataset"].split(".")[0]
        rep = export_model(model, work, target="cortex-m4", layout=layout, dtype="f32", measure=False)
        assert rep.exact is True
        exe = build_driver(work, rep.name, float_input=True, extra=UBSAN)
        got = run_driver(exe, X, work)
        Q = np.column_stack([q15_of_raw(X[:, j], model.scaling.offset[j], model.scaling.scale[j])
                             for j in range(model.n_features)]).astype(np.int64)
        want = predict_fixed(quantize_model(model), Q, model.n_classes)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"{bad.size} of {X.shape[0]} rows differ; first {X[bad[0]].tolist()}"
        assert X.shape[0] > 5000
        ctx_trees = build_context(model, name=rep.name, target=get_target("cortex-m4"), layout=layout,
                                  dtype="f32", variant="scalar", qtrees=None)["trees"]
        nan_rows = X[:64].copy()
        nan_rows[:, ::2] = np.nan
        nan_rows[1::2, 1::2] = -np.float32(np.nan)
        assert np.array_equal(run_driver(exe, nan_rows, work), predict_f32(ctx_trees, nan_rows, model.n_classes))


def test_f32_raw_agreement_figures(tmp_path):
    """Oblique trees with the scaling folded (min-max, physical units): agreement with the float model
    is measured (documented >= 99.9 % on rows inside the scaled range here); the C equals predict_f32,
    its Python model, bit for bit."""
    rng = np.random.default_rng(61)
    for k, (n_features, modes) in enumerate([(8, ["efti"]), (11, ["float"]), (60, ["efti"]),
                                             (8, ["axis", "efti", "pair"])]):
        lo, span = rng.uniform(-50, 50, n_features), rng.uniform(0.5, 300, n_features)
        scaling = InputScaling.fit(lo + span * rng.random((500, n_features)), "minmax")
        trees = [random_tree(rng, n_features, 4, 15, m) for m in modes]
        model = make_model(trees, n_features, 4, scaling=scaling, dataset=f"mm{k}.csv")
        X = (scaling.offset + rng.uniform(0, 32767 / 32768, (20_000, n_features)) / (scaling.scale * 32768)
             ).astype(F32)
        work = tmp_path / f"mm{k}"
        for layout in ("table", "unrolled"):
            rep = export_model(model, work, target="cortex-m4", layout=layout, dtype="f32", measure=False)
            got = run_driver(build_driver(work, rep.name, float_input=True, extra=UBSAN), X, work)
            ctx_trees = build_context(model, name=rep.name, target=get_target("cortex-m4"), layout=layout,
                                      dtype="f32", variant="scalar", qtrees=None)["trees"]
            assert np.array_equal(got, predict_f32(ctx_trees, X, model.n_classes))
            agree = 100.0 * float(np.mean(got == model.predict_index(X.astype(np.float64))))
            assert agree >= 99.9, f"{modes} ({layout}): f32 agreement {agree:.3f} %"
