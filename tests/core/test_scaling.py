"""Input scaling: raw features -> Q15 grid."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import load_shared

from treegen.core.errors import TreegenError
from treegen.core.scaling import Q15_MAX, Q15_ONE, InputScaling


def test_constants():
    assert (Q15_ONE, Q15_MAX) == (32768, 32767)


# ---------------------------------------------------------------------------------------------- q15
def test_q15_detected_on_integer_data_and_x_q15_equals_raw():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 32768, size=(500, 4))
    X[0] = [0, 32767, 0, 32767]
    s = InputScaling.fit(X)
    assert s.method == "q15"
    assert np.array_equal(s.offset, np.zeros(4))
    assert np.array_equal(s.scale, np.full(4, 1 / 32768))
    q = s.to_q15(X)
    assert q.dtype == np.int16
    assert np.array_equal(q, X)
    assert np.array_equal(s.transform(X), X / 32768.0)
    assert s.transform(X).max() == 32767 / 32768 < 1.0


def test_q15_on_float_integer_values_and_explicit_method():
    X = np.array([[0.0, 100.0], [32767.0, 5.0]])
    assert InputScaling.fit(X).method == "q15"
    assert InputScaling.fit(X, "q15").method == "q15"
    assert np.array_equal(InputScaling.fit(X, "q15").to_q15(X), X.astype(np.int16))


def test_q15_on_a_shared_dataset():
    X, _ = load_shared("irs")
    s = InputScaling.fit(X)
    assert s.method == "q15"
    assert np.array_equal(s.to_q15(X), X)


@pytest.mark.parametrize("X", [
    [[0, 1], [32768, 2]],     # one past the Q15 range
    [[-1, 1], [3, 2]],        # negative
    [[0.5, 1], [3, 2]],       # not an integer
], ids=["too-large", "negative", "fraction"])
def test_non_q15_data_falls_back_to_minmax_or_is_rejected(X):
    X = np.array(X, dtype=np.float64)
    assert InputScaling.fit(X).method == "minmax"
    assert InputScaling.fit(X, "auto").method == "minmax"
    with pytest.raises(TreegenError, match="integer in 0..32767"):
        InputScaling.fit(X, "q15")


def test_unknown_method():
    with pytest.raises(TreegenError, match="unknown scaling method 'zscore'"):
        InputScaling.fit(np.zeros((2, 2)), "zscore")


# ---------------------------------------------------------------------------------------------- minmax
def test_minmax_maps_min_to_0_and_max_to_32767():
    X = np.array([[-3.0, 1e6, 0.1], [7.0, 2e6, 0.2], [2.0, 1.5e6, 0.3], [0.0, 1.25e6, 0.15]])
    s = InputScaling.fit(X, "minmax")
    assert s.method == "minmax"
    assert np.array_equal(s.offset, X.min(axis=0))
    q = s.to_q15(X)
    assert q.dtype == np.int16
    assert q.min(axis=0).tolist() == [0, 0, 0]
    assert q.max(axis=0).tolist() == [32767, 32767, 32767]
    assert q[np.argmin(X, axis=0), [0, 1, 2]].tolist() == [0, 0, 0]
    assert q[np.argmax(X, axis=0), [0, 1, 2]].tolist() == [32767, 32767, 32767]
    # mid points land in the middle (32767 / 2 = 16383.5, rounded either way by float error)
    assert q[2, 0] in (16383, 16384) and q[2, 1] in (16383, 16384)
    assert np.all(s.transform(X) >= 0) and np.all(s.transform(X) < 1)
    # order preserved
    for j in range(3):
        order = np.argsort(X[:, j], kind="stable")
        assert np.all(np.diff(q[order, j].astype(int)) >= 0)


def test_transform_is_on_the_q15_grid():
    X = np.random.default_rng(3).normal(size=(200, 3)) * 1000
    s = InputScaling.fit(X)
    Xn = s.transform(X)
    assert np.array_equal(Xn * 32768, np.round(Xn * 32768))
    assert np.array_equal(Xn, s.to_q15(X) / 32768.0)


def test_constant_column():
    X = np.array([[5.5, 1.0], [5.5, 2.0], [5.5, 3.0]])
    s = InputScaling.fit(X)
    assert s.method == "minmax"
    assert s.scale[0] == 0.0 and s.offset[0] == 5.5
    assert np.all(np.isfinite(s.scale))
    q = s.to_q15(X)
    assert q[:, 0].tolist() == [0, 0, 0]
    assert q[:, 1].tolist() == [0, 16384, 32767]
    # unseen values of the constant column still map to 0 at predict time
    assert s.to_q15(np.array([[-1e9, 2.0], [1e9, 2.0]]))[:, 0].tolist() == [0, 0]


def test_constant_q15_column_keeps_q15():
    X = np.array([[7, 1], [7, 2]])
    s = InputScaling.fit(X)
    assert s.method == "q15"
    assert s.to_q15(X)[:, 0].tolist() == [7, 7]


def test_out_of_range_inputs_are_clipped_at_predict_time():
    X = np.array([[0.0, 10.0], [1.0, 20.0]])
    s = InputScaling.fit(X, "minmax")  # (integer data would be detected as q15 by "auto")
    new = np.array([[-0.5, 5.0], [1.5, 25.0], [-1e300, 1e300], [0.5, 15.0]])
    q = s.to_q15(new)
    assert q.tolist() == [[0, 0], [32767, 32767], [0, 32767], [16384, 16384]]
    xn = s.transform(new)
    assert xn.min() == 0.0 and xn.max() == 32767 / 32768


def test_q15_scaling_clips_and_rounds_half_to_even():
    s = InputScaling.fit(np.array([[0, 32767]]).T)
    new = np.array([[-10.0], [40000.0], [0.5], [1.5], [2.5], [3.49], [32766.6]])
    assert s.to_q15(new)[:, 0].tolist() == [0, 32767, 0, 2, 2, 3, 32767]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_input_is_an_error(bad):
    s = InputScaling.fit(np.array([[0.0, 1.0], [2.0, 3.0]]))
    X = np.array([[1.0, 2.0], [1.0, bad]])
    with pytest.raises(TreegenError, match="NaN or infinite"):
        s.to_q15(X)
    with pytest.raises(TreegenError, match="NaN or infinite"):
        s.transform(X)


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 1)])
def test_wrong_feature_count(shape):
    s = InputScaling.fit(np.array([[0.0, 1.0], [2.0, 3.0]]))
    with pytest.raises(TreegenError, match="expected 2 features"):
        s.to_q15(np.zeros(shape))


# ---------------------------------------------------------------------------------------------- dict
@pytest.mark.parametrize("method", ["q15", "minmax"])
def test_dict_round_trip_is_exact(method):
    if method == "q15":
        s = InputScaling.fit(np.array([[0, 1], [32767, 3]]))
    else:
        s = InputScaling.fit(np.array([[0.1, -1 / 3, 7.0], [1e-300, 2 / 3, 7.0], [0.3, 1e300, 7.0]]))
    assert s.method == method
    d = json.loads(json.dumps(s.to_dict()))
    assert d["method"] == method
    back = InputScaling.from_dict(d)
    assert back.method == s.method
    assert np.array_equal(back.offset, s.offset)
    assert np.array_equal(back.scale, s.scale)
    X = np.random.default_rng(0).uniform(-1, 2, size=(50, s.n_features))
    assert np.array_equal(back.to_q15(X), s.to_q15(X))


def test_from_dict_defaults_and_errors():
    assert InputScaling.from_dict({"offset": [0], "scale": [1]}).method == "minmax"
    with pytest.raises(TreegenError, match="malformed input scaling"):
        InputScaling.from_dict({"offset": [0]})
    with pytest.raises(TreegenError, match="malformed input scaling"):
        InputScaling.from_dict({"offset": ["a"], "scale": [1]})
    with pytest.raises(TreegenError, match="equal length"):
        InputScaling.from_dict({"offset": [0, 1], "scale": [1]})
    with pytest.raises(TreegenError, match="non-finite"):
        InputScaling.from_dict({"offset": [0], "scale": [float("inf")]})


def test_constructor_validation():
    with pytest.raises(TreegenError, match="equal length"):
        InputScaling(np.zeros(2), np.zeros(3))
    with pytest.raises(TreegenError, match="equal length"):
        InputScaling(np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(TreegenError, match="non-finite"):
        InputScaling(np.array([np.nan]), np.ones(1))
    assert InputScaling([1, 2], [3, 4]).n_features == 2
