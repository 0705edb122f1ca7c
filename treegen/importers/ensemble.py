"""The neutral form of an imported value-tree ensemble (boosted or averaged) and its reference evaluation.

Every importer of a boosted / regression model (XGBoost, LightGBM, scikit-learn gradient boosting and
regressors, ONNX-ML tree ensembles) first parses its source into an :class:`ImportedEnsemble`: the
trees as node arrays *with the library's own test* (its threshold value, ``<`` or ``<=``, the precision
of the threshold), the default direction of a missing (NaN) input, the leaf values the library adds,
the output each tree adds to, the base score, the link and the precision of the sum. Its
:meth:`ImportedEnsemble.raw` reproduces the library's raw score (margin / decision function /
regression output) with the library's own arithmetic, and is checked against the library's ``predict``
in the tests; :func:`le_threshold` turns each library test into the one form the treegen tree IR
stores (``float32(x) <= t32``, see ``h25`` representation): exact for every float32 input.

What each library computes (checked against the library on random rows and +-64 float32 ulps around
every threshold, ``tests/importers/test_import_boosted.py``):

========================  =========  ===========  ==========  ==============  ======================
source                    test       threshold    leaf value  sum             binary class 1 iff
========================  =========  ===========  ==========  ==============  ======================
XGBoost                   ``x < t``  float32      float32     float32, base   raw > 0x1.8p-24
                                                              first           (float32 sigmoid > 0.5)
LightGBM                  ``x <= t`` float64      float64     float64, tree   raw > 0x1.8p-53
                                                              order (init     (double sigmoid > 0.5)
                                                              folded in tree
                                                              0)
sklearn GradientBoosting  ``x <= t`` float64 (x   lr * value  float64, init   raw >= 0
                                     float32)     (float64)   first
sklearn HistGradientBoo.  ``x <= t`` float64      float64     float64, base   raw > 0
                                                              first
ONNX-ML (onnxruntime)     as stored  float32      float32     float32, base   raw > 0 (raw > 0.5 when
                                                              last            no weight is negative)
sklearn forests (mean)    ``x <= t`` float64 (x   float64     float64 / n     --
                                     float32)
========================  =========  ===========  ==========  ==============  ======================

Multiclass: scikit-learn and onnxruntime take the first largest raw score (exact); XGBoost
(``multi:softprob``) and LightGBM the first largest *probability* of a float32 / double softmax, which
can round two outputs to the same probability: then the library takes the lower index although its
raw score is smaller. That happens only when the two raw scores are within ``tie_gap`` (XGBoost
2^-22, LightGBM 2^-51; measured largest gap with a tie: 1.5 ulp of 1.0, i.e. 1.5 * 2^-24 / 2^-53).
Why: the largest output's exponential is ``exp(0) = 1``; an output ``d >= 4u`` below it (``u`` the
unit roundoff below 1) has ``exp(-d) <= 1 - 3u`` even with a 1-ulp ``exp``, so after the division by
the sum the two quotients are at least 1.5 ulp apart and round to different values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from treegen.core.errors import TreegenError

LEAF = -1
LINKS = ("identity", "logistic", "softmax")
SUM_DTYPES = {"float32": np.float32, "float64": np.float64}
F32_MAX = float(np.finfo(np.float32).max)

__all__ = ["ImportedTree", "ImportedEnsemble", "le_threshold", "f32_round_down"]

_TREE_ARRAYS = ("feature", "threshold", "left", "right", "value")
_ENSEMBLE_FIELDS = ("n_features", "op", "task", "classes", "n_outputs", "vote", "base_score", "link", "sum_dtype",
                    "binary_rule", "decision_value", "tie_gap")


def _json_floats(values) -> list:
    """Floats for a JSON file (which has no infinity): +-inf as the strings "inf" / "-inf"."""
    return [v if np.isfinite(v) else ("inf" if v > 0 else "-inf") for v in np.asarray(values, dtype=np.float64).tolist()]


def f32_round_down(t: float) -> float:
    """The largest float32 not above the double ``t`` (``t`` itself when it is a float32 value);
    ``float32(x) <= t``  <=>  ``float32(x) <= f32_round_down(t)`` for every float32 ``x``."""
    if np.isinf(t):
        return float(t)
    t32 = np.float32(t)
    if float(t32) > t:
        t32 = np.nextafter(t32, np.float32(-np.inf))
    return float(t32)


def le_threshold(t: float, op: str) -> float:
    """The float32 value ``t32`` with ``x <= t32``  <=>  ``x op t`` for every float32 ``x`` (``op`` is
    ``"<="`` or ``"<"``; ``t`` any double: a float32 threshold is a double too)."""
    down = f32_round_down(t)
    if op == "<=":
        return down
    if op == "<":   # x < t  <=>  x <= the largest float32 below t
        if down == t:
            return float(np.nextafter(np.float32(t), np.float32(-np.inf)))
        return down
    raise ValueError(f"unknown comparison {op!r}")


@dataclass(eq=False)
class ImportedTree:
    """One tree as its library stores it. Node 0 is the root; ``left``/``right`` are ``-1`` at leaves.

    ``feature``/``threshold``: the test of an internal node, ``x[feature] OP threshold`` -> left
    (``OP`` is the ensemble's ``op``); ``threshold`` holds the library's value exactly (a float32 value
    for float32 libraries). ``missing_left``: where NaN goes (``None``: the library does not route
    NaN). ``value``: what the tree adds at each leaf (0 at internal nodes). ``output``: the output
    (class) the tree adds to.
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    missing_left: np.ndarray | None = None
    output: int = 0

    def __post_init__(self) -> None:
        self.feature = np.asarray(self.feature, dtype=np.int64)
        self.threshold = np.asarray(self.threshold, dtype=np.float64)
        self.left = np.asarray(self.left, dtype=np.int64)
        self.right = np.asarray(self.right, dtype=np.int64)
        self.value = np.asarray(self.value, dtype=np.float64)
        if self.missing_left is not None:
            self.missing_left = np.asarray(self.missing_left, dtype=bool)
        n = self.left.shape[0]
        for name in ("feature", "threshold", "right", "value"):
            if getattr(self, name).shape != (n,):
                raise TreegenError(f"imported tree: {name} has shape {getattr(self, name).shape}, expected ({n},)")
        internal = self.left != LEAF
        if np.any((self.right != LEAF) != internal):
            raise TreegenError("imported tree: a node has exactly one child")
        kids = np.concatenate([self.left[internal], self.right[internal]])
        if kids.size and (kids.min() < 1 or kids.max() >= n or np.unique(kids).size != kids.size):
            raise TreegenError("imported tree: child links do not form a tree")

    @property
    def n_nodes(self) -> int:
        return int(self.left.shape[0])

    def leaves(self, X: np.ndarray, op: str) -> np.ndarray:
        """The leaf each row of ``X`` (float64 holding float32 values) reaches, by the library's test."""
        node = np.zeros(X.shape[0], dtype=np.int64)
        active = self.left[node] != LEAF
        rows = np.arange(X.shape[0])
        while active.any():
            r = rows[active]
            nd = node[r]
            x = X[r, self.feature[nd]]
            t = self.threshold[nd]
            go_left = (x < t) if op == "<" else (x <= t)
            nan = np.isnan(x)
            if nan.any():
                if self.missing_left is None:
                    raise TreegenError("NaN input to a model that does not route missing values")
                go_left = np.where(nan, self.missing_left[nd], go_left)
            node[r] = np.where(go_left, self.left[nd], self.right[nd])
            active = self.left[node] != LEAF
        return node


@dataclass(eq=False)
class ImportedEnsemble:
    """A parsed value-tree ensemble, with the library's exact semantics (see the module documentation).

    ``vote`` "sum": raw[k] = base_score[k] + the values of the trees with ``output == k``, accumulated
    in ``sum_dtype`` in tree order, the base first; then ``raw[k] = scale * raw[k] + bias[k]`` (one
    rounding each, ``bias`` None: none; CatBoost's scale and bias, applied after the trees). ``vote`` "mean": the float64 sum of the trees'
    values in tree order (from 0) divided by the number of trees (scikit-learn forests).
    ``binary_rule`` / ``decision_value`` (classification with one output): class 1 iff
    ``raw binary_rule decision_value`` (``">"`` or ``">="``; the library's own rule, a value of the sum
    precision: a library whose class decision goes through a float sigmoid calls class 1 only above a
    tiny positive raw). ``tie_gap`` (several outputs): the library's argmax of its rounded softmax
    equals the argmax of the raw scores unless a lower-index output lies within ``tie_gap`` below the
    largest (0: the library takes the argmax of the raw scores itself).
    """

    trees: list[ImportedTree]
    n_features: int
    op: str
    task: str = "classification"
    classes: list = field(default_factory=list)
    n_outputs: int = 1
    vote: str = "sum"
    base_score: list[float] = field(default_factory=lambda: [0.0])
    link: str = "identity"
    sum_dtype: str = "float64"
    binary_rule: str = ">"
    decision_value: float = 0.0
    tie_gap: float = 0.0
    feature_names: list[str] | None = None
    metadata: dict = field(default_factory=dict)
    scale: float = 1.0
    bias: list[float] | None = None

    def __post_init__(self) -> None:
        if self.op not in ("<", "<="):
            raise TreegenError(f"unknown comparison {self.op!r}")
        if self.vote not in ("sum", "mean"):
            raise TreegenError(f"unknown ensemble vote {self.vote!r}")
        if self.link not in LINKS:
            raise TreegenError(f"unknown link {self.link!r}")
        if self.sum_dtype not in SUM_DTYPES:
            raise TreegenError(f"unknown sum precision {self.sum_dtype!r}")
        if not self.trees:
            raise TreegenError("the model has no trees")
        if len(self.base_score) != self.n_outputs:
            raise TreegenError(f"{len(self.base_score)} base scores for {self.n_outputs} outputs")
        if self.bias is not None and len(self.bias) != self.n_outputs:
            raise TreegenError(f"{len(self.bias)} bias values for {self.n_outputs} outputs")
        if not np.isfinite(self.scale) or (self.bias is not None and not np.all(np.isfinite(self.bias))):
            raise TreegenError("the model's scale or bias is not finite")
        for t in self.trees:
            if not 0 <= t.output < self.n_outputs:
                raise TreegenError(f"a tree adds to output {t.output} of {self.n_outputs}")
            used = t.feature[t.left != LEAF]
            bad = used[(used < 0) | (used >= self.n_features)]
            if bad.size:    # the offending index itself (not the largest one of the tree)
                raise TreegenError(f"a split tests feature index {int(bad[0])}, outside 0..{self.n_features - 1}")
        if self.binary_rule not in (">", ">="):
            raise TreegenError(f"unknown binary rule {self.binary_rule!r}")
        if self.feature_names is None:
            self.feature_names = [f"x{i}" for i in range(self.n_features)]

    @property
    def routes_missing(self) -> bool:
        return all(t.missing_left is not None for t in self.trees)

    def as_float32_rows(self, X) -> np.ndarray:
        """Rows as the models see them: float32 values (NaN kept), held in float64."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise TreegenError(f"X must have shape (n_samples, {self.n_features}), got {X.shape}")
        return X.astype(np.float32).astype(np.float64)

    def raw(self, X) -> np.ndarray:
        """The library's raw score, shape ``(n_rows, n_outputs)`` (float32 values for a float32 sum)."""
        X = self.as_float32_rows(X)
        dt = SUM_DTYPES[self.sum_dtype]
        if self.vote == "mean":
            acc = np.zeros((X.shape[0], self.n_outputs), dtype=np.float64)
            for t in self.trees:
                acc[:, t.output] += t.value[t.leaves(X, self.op)]
            return acc / len(self.trees)
        acc = np.tile(np.asarray(self.base_score, dtype=dt), (X.shape[0], 1))
        for t in self.trees:
            acc[:, t.output] = acc[:, t.output] + t.value[t.leaves(X, self.op)].astype(dt)
        if self.scale != 1.0:
            acc = acc * dt(self.scale)
        if self.bias is not None:
            acc = acc + np.asarray(self.bias, dtype=np.float64).astype(dt)
        return acc

    def predict_index(self, X, raw: np.ndarray | None = None) -> np.ndarray:
        """Class index per row (classification): the library's tie rules (see the class docstring)."""
        if self.task != "classification":
            raise TreegenError("a regression model has no classes")
        raw = self.raw(X) if raw is None else raw
        if self.n_outputs == 1:
            r = raw[:, 0].astype(np.float64)
            v = self.decision_value
            return ((r >= v) if self.binary_rule == ">=" else (r > v)).astype(np.int64)
        return np.argmax(raw, axis=1).astype(np.int64)

    def predict_value(self, X) -> np.ndarray:
        """Regression output per row (float64 holding the library's result)."""
        return self.raw(X)[:, 0].astype(np.float64)

    def le_thresholds(self, tree: ImportedTree) -> np.ndarray:
        """The tree's tests in treegen's form ``float32(x) <= t32`` (0 at leaves). An infinite library
        threshold (LightGBM and HistGradientBoosting write ``+inf`` for "every value left", NaN routed
        apart) stays infinite: ``x <= +inf`` sends ``+inf`` left as the library does (the largest finite
        float32 in its place would send it right)."""
        out = np.zeros(tree.n_nodes)
        for node in np.flatnonzero(tree.left != LEAF):
            out[node] = le_threshold(float(tree.threshold[node]), self.op)
        return out

    def to_dict(self) -> dict:
        """The ensemble as JSON-ready data (the library's own tests, thresholds and values; infinite
        thresholds as "inf" / "-inf"): what a model file keeps as ``metadata["library_reference"]`` so
        that HIL can check a device against the library's arithmetic itself (:meth:`from_dict`)."""
        trees = []
        for t in self.trees:
            d = {"feature": t.feature.tolist(), "threshold": _json_floats(t.threshold), "left": t.left.tolist(),
                 "right": t.right.tolist(), "value": t.value.tolist(), "output": int(t.output)}
            if t.missing_left is not None:
                d["missing_left"] = t.missing_left.tolist()
            trees.append(d)
        out = {k: getattr(self, k) for k in _ENSEMBLE_FIELDS}
        out["classes"] = [c.item() if isinstance(c, np.generic) else c for c in self.classes]
        out["base_score"] = [float(b) for b in self.base_score]
        out["decision_value"] = float(self.decision_value)
        out["tie_gap"] = float(self.tie_gap)
        out["scale"] = float(self.scale)                     # CatBoost's scale and bias, after the trees
        out["bias"] = None if self.bias is None else [float(b) for b in self.bias]
        return out | {"trees": trees}

    @classmethod
    def from_dict(cls, d: dict) -> "ImportedEnsemble":
        """The ensemble of :meth:`to_dict` (a malformed one raises :class:`TreegenError`)."""
        try:
            trees = [ImportedTree(*(np.asarray(t[k], dtype=np.float64 if k in ("threshold", "value") else np.int64)
                                    for k in _TREE_ARRAYS),
                                  missing_left=t.get("missing_left"), output=int(t.get("output", 0)))
                     for t in d["trees"]]
            bias = d.get("bias")
            return cls(trees=trees, **{k: d[k] for k in _ENSEMBLE_FIELDS}, scale=float(d.get("scale", 1.0)),
                       bias=None if bias is None else [float(b) for b in bias])
        except (KeyError, TypeError, ValueError) as exc:
            raise TreegenError(f"malformed library reference: {exc}") from None

    def split_points(self) -> list[tuple[int, float]]:
        """Every (feature, library threshold) of every tree (for threshold-neighbourhood checks)."""
        pts = []
        for t in self.trees:
            inner = t.left != LEAF
            pts.extend(zip(t.feature[inner].tolist(), t.threshold[inner].tolist()))
        return pts
