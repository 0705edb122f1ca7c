"""treegen.device.float_probes (float32 inputs around every threshold) and the float-entry check of
``run_hil(..., float_ulps=N)`` on the native harness (PREDICT_RAW)."""

from __future__ import annotations

import numpy as np
import pytest

from treegen import CARTClassifier, EFTIClassifier
from treegen.device import hil
from treegen.device.float_probes import breakpoints, threshold_probes
from treegen.emit.quantize import quantize_model


def _data(n: int = 200, seed: int = 4):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3.0, 7.0, size=(n, 3))
    y = (X[:, 0] + 0.7 * X[:, 1] > 2.0).astype(int) + (X[:, 2] > 4.0).astype(int)
    return X, y


def test_axis_probes_straddle_every_threshold():
    """Per axis node: the middle probe of its 2 * ulps + 1 is the last float32 with q <= T, the next
    one has q > T (a positive scale), and the other features are the base row's."""
    X, y = _data()
    model = CARTClassifier(max_depth=3).fit(X, y).model_
    ulps = 4
    probes, n_points = threshold_probes(model, X, ulps)
    pts = breakpoints(model, model.scaling.to_q15(X.astype(np.float32).astype(np.float64)))
    qt = quantize_model(model)[0]
    assert n_points == len(pts) == qt.n_internal and probes.shape == (n_points * (2 * ulps + 1), 3)
    assert np.all(model.scaling.scale > 0)
    for i, (f, T, b) in enumerate(pts):
        block = probes[i * (2 * ulps + 1):(i + 1) * (2 * ulps + 1)]
        q = model.scaling.to_q15(block.astype(np.float64))[:, f]
        assert q[ulps] <= T < q[ulps + 1]
        col = block[:, f]
        assert np.array_equal(col[1:], np.nextafter(col[:-1], np.float32(np.inf)))   # consecutive float32 values
        others = [j for j in range(3) if j != f]
        assert np.array_equal(block[:, others], np.repeat(X[b:b + 1, others].astype(np.float32), len(block), 0))


def test_oblique_probes_flip_the_node_test():
    """An oblique node: moving one feature across its breakpoint flips the integer test of the node."""
    X, y = _data(seed=9)
    model = EFTIClassifier(max_iter=300, random_state=1).fit(X, y).model_
    qt = quantize_model(model)[0]
    assert qt.kind == "oblique"
    Xq = model.scaling.to_q15(X.astype(np.float32).astype(np.float64)).astype(np.int64)
    pts = breakpoints(model, Xq)
    assert len(pts) >= qt.n_internal
    for f, T, b in pts:
        # some node's test changes between q = T and q = T + 1 at this base row
        flips = [int(qt.weights[k] @ np.where(np.arange(3) == f, T, Xq[b])) <= int(qt.threshold[k]) !=
                 (int(qt.weights[k] @ np.where(np.arange(3) == f, T + 1, Xq[b])) <= int(qt.threshold[k]))
                 for k in range(qt.n_internal)]
        assert any(flips), (f, T, b)


def test_run_hil_checks_the_float_entry_on_the_native_harness(tmp_path):
    X, y = _data()
    model = CARTClassifier(max_depth=4).fit(X, y).model_
    report = hil.run_hil(model, "native", data=(X, y), build_dir=tmp_path / "fw", bench_iters=10, float_ulps=16)
    assert report["ok"], report["checks"]
    fe = report["float_entry"]
    assert fe["mismatches"] == 0 and fe["ulps"] == 16 and fe["rows"] == 33 * fe["breakpoints"] > 0
    assert [c["name"] for c in report["checks"]] == ["hash", "predictions", "bench", "float entry"]


def test_float_ulps_out_of_range_is_one_error(tmp_path):
    X, y = _data()
    model = CARTClassifier(max_depth=2).fit(X, y).model_
    with pytest.raises(hil.TreegenError, match="float_ulps must be 0..4096"):
        hil.run_hil(model, "native", data=(X, y), build_dir=tmp_path / "fw", float_ulps=5000)


def test_a_wrong_float_entry_answer_fails_the_check(tmp_path, monkeypatch):
    from treegen.device.protocol import DeviceClient

    X, y = _data()
    model = CARTClassifier(max_depth=3).fit(X, y).model_
    real = DeviceClient.predict_raw

    def one_wrong(self, rows, **kw):
        out = real(self, rows, **kw)
        out[0] = (out[0] + 1) % model.n_classes
        return out

    monkeypatch.setattr(DeviceClient, "predict_raw", one_wrong)
    report = hil.run_hil(model, "native", data=(X, y), build_dir=tmp_path / "fw", bench_iters=10, float_ulps=1)
    assert not report["ok"] and report["float_entry"]["mismatches"] == 1
    assert report["checks"][-1]["name"] == "float entry" and not report["checks"][-1]["ok"]


def _blocks(probes, ulps):
    """(changed column, middle value, block) of each 2 * ulps + 1 block of probe rows: the one column
    whose values vary inside the block (the others are a data row's)."""
    k = 2 * ulps + 1
    out = []
    for i in range(0, probes.shape[0], k):
        block = probes[i:i + k]
        varying = np.flatnonzero(np.any(block != block[:1], axis=0))
        assert varying.size == 1, f"block {i // k} changes columns {varying.tolist()}"
        out.append((int(varying[0]), block[ulps, varying[0]], block))
    return out


def test_raw_threshold_probes_sit_on_each_thresholds_own_feature():
    """Imported model (source float32 thresholds): every probe block walks the column of a threshold's
    own feature (read from the tree's weights here, not from the probe code) around that threshold,
    and every threshold has its block (issue #32: probes on the wrong columns still printed
    'bit-identical around K thresholds')."""
    xgb = pytest.importorskip("xgboost")
    from treegen.device.float_probes import raw_threshold_probes
    from treegen.importers import from_xgboost

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5)) * np.array([1.0, 10.0, 100.0, 0.1, 1000.0])   # one scale per column
    y = (X[:, 1] / 10 + X[:, 3] * 10 + X[:, 4] / 1000 > 0).astype(int)
    model = from_xgboost(xgb.XGBClassifier(n_estimators=6, max_depth=3, n_jobs=1).fit(X, y))
    ulps = 3
    probes, n = raw_threshold_probes(model, X, ulps)
    want = set()
    for t in model.trees:
        for k in np.flatnonzero(t.left >= 0):
            want.add((int(np.flatnonzero(t.weights[k])[0]), float(np.float32(t.raw_threshold[k]))))
    got = {(c, float(mid)) for c, mid, _ in _blocks(probes, ulps)}
    assert n == len(want) and got == want
    assert len({c for c, _ in want}) >= 3


def test_q15_probes_sit_on_each_nodes_own_feature():
    """Every axis node of the quantised trees (its own feature and Q15 threshold, from quantize_model)
    has a probe block on that feature straddling q <= T."""
    X, y = _data(seed=11)
    X = X * np.array([1.0, 50.0, 0.02])
    y = (X[:, 0] > 2).astype(int) + (X[:, 1] > 100).astype(int) + (X[:, 2] > 0.05).astype(int)
    model = CARTClassifier(max_depth=4).fit(X, y).model_
    ulps = 2
    probes, _ = threshold_probes(model, X, ulps)
    blocks = _blocks(probes, ulps)
    qt = quantize_model(model)[0]
    assert len({int(f) for f in qt.feature}) == 3
    for f, T in zip(qt.feature.tolist(), qt.threshold.tolist()):
        hits = [b for c, _, b in blocks if c == f and
                (lambda q: q[ulps] <= T < q[ulps + 1])(model.scaling.to_q15(b.astype(np.float64))[:, f])]
        assert hits, (f, T)
