"""The model file: versioned JSON holding the tree(s), names, labels, input scaling and metadata.

Format (``format_version`` 1)::

    {
      "format": "treegen-model",
      "format_version": 1,
      "feature_names": [...],
      "classes": [...],              # original label values (ints or strings), index = class index
      "scaling": {"method": ..., "offset": [...], "scale": [...]},
      "trees": [ {tree dict}, ... ], # one tree, or several for an ensemble
      "vote": "soft",                # optional (absent: "hard"): how an ensemble combines its trees
      "input_contract": "float32",   # optional: the raw inputs the model is made for (see CONTRACTS)
      "task": "regression",          # optional (absent: "classification")
      "boost": {...},                # only with vote "sum" (see below)
      "metadata": {"algorithm": ..., "params": {...}, "seed": ..., "fitness": ...,
                   "train_accuracy": ..., "treegen_version": ...}
    }

``load(save(m))`` reproduces ``m`` exactly (floats are written with round-trip precision).

Voting (ensembles): ``hard`` -- majority of the trees' classes, ties -> lowest class index;
``soft`` -- argmax of the mean of the trees' leaf class probabilities (count frequencies, see
:meth:`Tree.leaf_probabilities`), ties -> lowest class index (scikit-learn's forests).
Both combine classification trees. Two votes combine *value trees* (``Tree.leaf_value``):
``mean`` -- a regression forest (or one regression tree): the float64 sum of the trees' leaf values
in tree order, starting from 0.0, divided by the number of trees (scikit-learn's forests);
``sum`` -- an additive (boosted) model, parameters in ``boost``::

    {"base_score": [b_0, ...],      # one per output
     "tree_output": [k_0, ...],     # one per tree: the output the tree adds to
     "link": "identity" | "logistic" | "softmax",
     "sum_dtype": "float32" | "float64",
     "scale": s, "bias": [c_0, ...]}   # optional: raw[k] = scale * sum[k] + bias[k] after the trees

``raw[k] = base_score[k] + the leaf values of the trees with tree_output k``, accumulated in
``sum_dtype``: the accumulator starts at ``sum_dtype(base_score[k])`` and each tree's leaf value,
rounded to ``sum_dtype``, is added in tree order (one rounding per addition); then, when present,
``raw[k] = sum_dtype(scale) * raw[k]`` (skipped when ``scale`` is 1: exact anyway) and
``raw[k] = raw[k] + sum_dtype(bias[k])``, one rounding each (CatBoost's ``scale_and_bias``, which it
applies after the trees). Classification with one
output (binary): class 1 iff ``raw[0] RULE VALUE`` with the optional
``"decision_threshold": {"value": VALUE, "rule": ">" | ">="}`` (the source library's own rule, e.g.
XGBoost's float32 sigmoid: ``raw > 0x1.8p-24``; a value of the sum precision), absent: ``raw[0] > 0``;
several outputs (one per class): argmax, ties -> lowest index. Probabilities (float64): ``logistic`` --
``1 / (1 + exp(-raw))`` (one output: ``[1 - p, p]``; several: per output, not normalised),
``softmax`` -- ``exp(raw - max) / sum``; ``identity`` has none.
Regression: the prediction is ``raw[0]`` (link identity).

Task (``TASKS``): ``classification`` (default; ``classes`` are the labels) or ``regression``
(``classes == []``, one output, vote ``mean`` or ``sum``; ``metadata["target_name"]`` optional).

Missing values: a NaN input is an error, unless every tree has ``missing_left`` (an imported model whose
library routes missing values): then NaN goes where ``missing_left`` says and infinities are compared.

Input contract (``CONTRACTS``): ``float32`` -- any float32 raw input; ``integer`` -- raw integer
inputs (a model fitted on integer data: the q15 raw wrapper rounds other values to the nearest
integer); ``q15`` -- inputs that already are Q15 values 0..32767. Absent in older files: ``integer``
for the ``q15`` scaling method, ``float32`` otherwise.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from treegen.core.atomic import atomic_write
from treegen.core.errors import ModelFileError, TreegenError
from treegen.core.jsonvalues import plain
from treegen.core.limits import MAX_MODEL_BYTES, bytes_text, read_bounded
from treegen.core.scaling import InputScaling
from treegen.core.schema import (CONTRACTS, FORMAT, FORMAT_VERSION, VALUE_VOTES, VOTES, check_boost,
                                 check_model_dict, check_task_vote)
from treegen.core.tree import Tree



@dataclass(eq=False)
class Model:
    trees: list[Tree]
    feature_names: list[str]
    classes: list
    scaling: InputScaling
    metadata: dict = field(default_factory=dict)
    vote: str = "hard"
    input_contract: str | None = None
    task: str = "classification"
    boost: dict | None = None

    def __post_init__(self) -> None:
        if self.boost is not None and isinstance(self.boost, dict):
            self.boost = _plain_boost(self.boost)
        self.validate()

    # ------------------------------------------------------------------ invariants
    def validate(self) -> "Model":
        if not self.trees:
            raise TreegenError("model has no tree")
        n_features = len(self.feature_names)
        n_classes = len(self.classes)
        try:
            check_task_vote(self.task, self.vote, self.boost is not None)
            if self.boost is not None:
                check_boost(self.boost, len(self.trees), self.task, n_classes)
        except ModelFileError as exc:
            raise TreegenError(f"invalid model: {exc}") from None
        if self.task == "regression" and n_classes:
            raise TreegenError(f"a regression model has no class labels, got {n_classes}")
        if self.task == "classification" and n_classes < 1:
            raise TreegenError("model has no class labels")
        if len(set(map(repr, self.classes))) != n_classes:
            raise TreegenError("model class labels are not unique")
        if self.scaling.n_features != n_features:
            raise TreegenError("model scaling does not match its feature count")
        if self.vote not in VOTES:
            raise TreegenError(f"unknown vote {self.vote!r} (choose from {', '.join(VOTES)})")
        if self.input_contract is not None and self.input_contract not in CONTRACTS:
            raise TreegenError(f"unknown input contract {self.input_contract!r} (choose from {', '.join(CONTRACTS)})")
        value = self.vote in VALUE_VOTES
        for k, tree in enumerate(self.trees):
            tree.validate()
            if tree.is_value_tree != value:
                raise TreegenError(f"tree {k} is a {'value' if tree.is_value_tree else 'classification'} tree, "
                                   f"vote {self.vote!r} combines {'value' if value else 'classification'} trees")
            if value:
                if tree.n_features != n_features:
                    raise TreegenError(f"tree {k} has {tree.n_features} features, the model {n_features}")
            elif tree.n_features != n_features or tree.n_classes != n_classes:
                raise TreegenError(
                    f"tree shape ({tree.n_features} features, {tree.n_classes} classes) does not match "
                    f"the model ({n_features} features, {n_classes} classes)")
        return self

    # ------------------------------------------------------------------ properties
    @property
    def tree(self) -> Tree:
        """The single tree of a one-tree model."""
        if len(self.trees) != 1:
            raise TreegenError(f"model is an ensemble of {len(self.trees)} trees")
        return self.trees[0]

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def is_regression(self) -> bool:
        return self.task == "regression"

    @property
    def n_outputs(self) -> int:
        """Numbers the model computes per row: the class count (hard/soft), ``len(boost.base_score)``
        (sum) or 1 (mean)."""
        if self.vote == "sum":
            return len(self.boost["base_score"])
        return 1 if self.vote == "mean" else self.n_classes

    @property
    def handles_missing(self) -> bool:
        """Every tree routes NaN inputs (``missing_left``): NaN and infinite inputs are accepted."""
        return all(t.missing_left is not None for t in self.trees)

    @property
    def contract(self) -> str:
        """The input contract (recorded, else derived from the scaling method)."""
        if self.input_contract is not None:
            return self.input_contract
        return "integer" if self.scaling.method == "q15" else "float32"

    @property
    def has_raw_thresholds(self) -> bool:
        """Every tree carries its source's raw float32 thresholds (an imported float model)."""
        return all(t.raw_threshold is not None for t in self.trees)

    # ------------------------------------------------------------------ inference
    def _combine(self, leaves: list, vote: str | None) -> np.ndarray:
        """Class indices from the leaf reached in every tree (``leaves[k]``: node per row)."""
        vote = self.vote if vote is None else vote
        if vote not in VOTES:
            raise TreegenError(f"unknown vote {vote!r} (choose from {', '.join(VOTES)})")
        if self.is_regression:
            raise TreegenError("a regression model predicts values, not classes")
        if (vote == "sum") != (self.vote == "sum") or vote == "mean":
            raise TreegenError(f"a model with vote {self.vote!r} cannot vote {vote!r}")
        if vote == "sum":
            return self.class_of_raw(self._raw(leaves))
        if len(self.trees) == 1:
            return self.trees[0].leaf_class[leaves[0]].astype(np.int64)
        if vote == "soft":
            return self._mean_proba(leaves).argmax(axis=1)
        n = leaves[0].shape[0]
        votes = np.zeros((n, self.n_classes), dtype=np.int64)
        rows = np.arange(n)
        for tree, leaf in zip(self.trees, leaves):
            votes[rows, tree.leaf_class[leaf]] += 1
        return votes.argmax(axis=1)

    @property
    def decision_threshold(self) -> tuple[float, str]:
        """``(value, rule)`` of a binary vote-'sum' classifier: class 1 iff ``raw[0] rule value``
        (``boost.decision_threshold``; absent: ``(0.0, ">")``)."""
        dt = (self.boost or {}).get("decision_threshold")
        return (0.0, ">") if dt is None else (float(dt["value"]), str(dt["rule"]))

    def class_of_raw(self, raw: np.ndarray) -> np.ndarray:
        """Class indices from the ``(n_rows, n_outputs)`` raw sums of a vote-'sum' classifier: one output
        ``raw[0] rule value`` (:attr:`decision_threshold`), several the first largest."""
        raw = np.asarray(raw, dtype=np.float64)
        if raw.shape[1] == 1:
            value, rule = self.decision_threshold
            return ((raw[:, 0] >= value) if rule == ">=" else (raw[:, 0] > value)).astype(np.int64)
        return raw.argmax(axis=1).astype(np.int64)

    def _raw(self, leaves: list) -> np.ndarray:
        """``(n_rows, n_outputs)`` sums of a vote-'sum' model, accumulated in ``boost.sum_dtype`` from
        ``base_score`` in tree order (returned as float64, exactly)."""
        dtype = np.float32 if self.boost["sum_dtype"] == "float32" else np.float64
        n = leaves[0].shape[0]
        acc = np.empty((n, self.n_outputs), dtype=dtype)
        acc[:] = np.asarray(self.boost["base_score"], dtype=np.float64).astype(dtype)
        for tree, leaf, k in zip(self.trees, leaves, self.boost["tree_output"]):
            acc[:, k] += tree.leaf_value[leaf].astype(dtype)
        scale = float(self.boost.get("scale", 1.0))
        if scale != 1.0:
            acc = acc * dtype(scale)
        if "bias" in self.boost:
            acc = acc + np.asarray(self.boost["bias"], dtype=np.float64).astype(dtype)
        return acc.astype(np.float64)

    def _mean_value(self, leaves: list) -> np.ndarray:
        """Vote 'mean': float64 sum of the leaf values in tree order, divided by the number of trees."""
        total = np.zeros(leaves[0].shape[0])
        for tree, leaf in zip(self.trees, leaves):
            total += tree.leaf_value[leaf]
        return total / len(self.trees)

    def _values(self, leaves: list) -> np.ndarray:
        if not self.is_regression:
            raise TreegenError("a classification model predicts classes, not values")
        return self._mean_value(leaves) if self.vote == "mean" else self._raw(leaves)[:, 0]

    def _mean_proba(self, leaves: list) -> np.ndarray:
        """Mean leaf class probabilities, summed in tree order then divided (as scikit-learn's forests)."""
        total = np.zeros((leaves[0].shape[0], self.n_classes))
        for tree, leaf in zip(self.trees, leaves):
            total += tree.leaf_probabilities()[leaf]
        return total / len(self.trees)

    def _leaves(self, X_raw: np.ndarray) -> list:
        X_raw = np.asarray(X_raw, dtype=np.float64)
        if X_raw.ndim != 2 or X_raw.shape[1] != self.n_features:
            raise TreegenError(
                f"data has {X_raw.shape[1] if X_raw.ndim == 2 else '?'} features, the model expects {self.n_features}")
        routed = self.handles_missing
        if self.has_raw_thresholds:   # the source's own float32 tests
            if not routed and not np.all(np.isfinite(X_raw)):
                raise TreegenError("input contains NaN or infinite values")
            return [t.apply_raw(X_raw) for t in self.trees]
        if routed:                    # NaN stays NaN on the grid (routed), infinities saturate
            missing = np.isnan(X_raw)
            Xn = self.scaling.transform(np.where(missing, 0.0, np.nan_to_num(X_raw, nan=0.0, posinf=1e300,
                                                                             neginf=-1e300)))
            Xn[missing] = np.nan
        else:
            Xn = self.scaling.transform(X_raw)
        return [t.apply(Xn) for t in self.trees]

    def predict_index_normalised(self, X: np.ndarray, vote: str | None = None) -> np.ndarray:
        """Class indices for already-normalised inputs (the trees' grid thresholds; the model's vote,
        ties -> lowest index)."""
        return self._combine([t.apply(X) for t in self.trees], vote)

    def predict_value_normalised(self, X: np.ndarray) -> np.ndarray:
        """Predicted values (float64) of a regression model for already-normalised inputs."""
        return self._values([t.apply(X) for t in self.trees])

    def predict_value(self, X_raw: np.ndarray) -> np.ndarray:
        """Predicted values (float64) of a regression model for raw inputs: vote 'mean' -- the mean of
        the trees' leaf values; vote 'sum' -- ``raw[0]`` (exactly the ``sum_dtype`` sum)."""
        return self._values(self._leaves(X_raw))

    def decision_function(self, X_raw: np.ndarray) -> np.ndarray:
        """The raw sums of a vote-'sum' model (float64 holding the ``sum_dtype`` values exactly):
        ``(n_rows,)`` for one output, ``(n_rows, n_outputs)`` otherwise."""
        if self.vote != "sum":
            raise TreegenError(f"decision_function needs a model with vote 'sum' (this one votes {self.vote!r})")
        raw = self._raw(self._leaves(X_raw))
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def predict_index(self, X_raw: np.ndarray, vote: str | None = None) -> np.ndarray:
        """Class indices for raw inputs: the source's float32 tests when the trees carry raw thresholds
        (imported models), else the input scaling and the trees' tests on the Q15 grid."""
        return self._combine(self._leaves(X_raw), vote)

    def predict_proba(self, X_raw: np.ndarray) -> np.ndarray:
        """Class probabilities (float64, columns in ``classes`` order) for raw inputs: the mean over the
        trees of the leaf count frequencies (scikit-learn's ``predict_proba``); a vote-'sum' model: its
        link applied to the raw sums (see the module text)."""
        if self.is_regression:
            raise TreegenError("a regression model has no class probabilities")
        if self.vote != "sum":
            return self._mean_proba(self._leaves(X_raw))
        raw = self._raw(self._leaves(X_raw))
        link = self.boost["link"]
        if link == "identity":
            raise TreegenError("the model's link is identity: its raw sums are no probabilities")
        if link == "softmax":
            e = np.exp(raw - raw.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        p = 1.0 / (1.0 + np.exp(-raw))
        return np.column_stack([1.0 - p[:, 0], p[:, 0]]) if raw.shape[1] == 1 else p

    def feature_importances(self, criterion: str = "gini") -> np.ndarray:
        """Impurity-based feature importances summing to 1 (:meth:`Tree.feature_importances`); an
        ensemble averages its trees' (single-leaf trees left out, then normalised: scikit-learn's
        rule for forests)."""
        per_tree = [t.feature_importances(criterion) for t in self.trees if t.n_nodes > 1]
        if not per_tree:
            return np.zeros(len(self.feature_names))
        mean = np.mean(per_tree, axis=0)
        return mean / mean.sum() if mean.sum() > 0 else mean

    def predict(self, X_raw: np.ndarray) -> np.ndarray:
        """Original class labels for raw inputs; a regression model: its values (:meth:`predict_value`)."""
        if self.is_regression:
            return self.predict_value(X_raw)
        labels = np.asarray(self.classes, dtype=object)
        return labels[self.predict_index(X_raw)]

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "feature_names": list(self.feature_names),
            "classes": [plain(c) for c in self.classes],
            "scaling": self.scaling.to_dict(),
            "trees": [t.to_dict() for t in self.trees],
            "metadata": plain(self.metadata),
        } | ({"vote": self.vote} if self.vote != "hard" else {}) | (
            {"input_contract": self.input_contract} if self.input_contract is not None else {}) | (
            {"task": self.task} if self.task != "classification" else {}) | (
            {"boost": dict(self.boost)} if self.boost is not None else {})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)

    def hash(self) -> str:
        """Content hash of the model (metadata excluded): identifies the model on a device."""
        d = self.to_dict()
        d.pop("metadata")
        blob = json.dumps(d, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()

    @classmethod
    def from_dict(cls, d: dict) -> "Model":
        """Build a model from a decoded model file, every field checked first
        (:func:`treegen.core.schema.check_model_dict`): errors read ``<field>: <problem>``."""
        check_model_dict(d)
        try:
            trees = [Tree.from_dict(t) for t in d["trees"]]
            return cls(
                trees=trees,
                feature_names=list(d["feature_names"]),
                classes=list(d["classes"]),
                scaling=InputScaling.from_dict(d["scaling"]),
                metadata=dict(d.get("metadata") or {}),
                vote=str(d.get("vote", "hard")),
                input_contract=None if d.get("input_contract") is None else str(d["input_contract"]),
                task=str(d.get("task", "classification")),
                boost=None if d.get("boost") is None else dict(d["boost"]),
            )
        except ModelFileError:
            raise
        except TreegenError as exc:
            raise ModelFileError(f"invalid model: {exc}") from None


def _plain_boost(boost: dict) -> dict:
    """``boost`` with JSON-native values (floats, ints), its keys in the file's order; unknown keys and
    wrong types are left for :func:`check_boost` to name."""
    out = dict(boost)
    try:
        if "base_score" in out:
            out["base_score"] = [float(v) for v in out["base_score"]]
        if "bias" in out:
            out["bias"] = [float(v) for v in out["bias"]]
        if isinstance(out.get("scale"), (int, float, np.integer, np.floating)) and not isinstance(out["scale"], bool):
            out["scale"] = float(out["scale"])
        if isinstance(out.get("decision_threshold"), dict):
            dt = dict(out["decision_threshold"])
            if isinstance(dt.get("value"), (int, float, np.integer, np.floating)) and not isinstance(dt["value"], bool):
                dt["value"] = float(dt["value"])
            out["decision_threshold"] = dt
        if "tree_output" in out:
            out["tree_output"] = [int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else v
                                  for v in out["tree_output"]]
    except (TypeError, ValueError):
        return dict(boost)
    return out


def save(model: Model, path: str | Path) -> Path:
    """Write ``model`` to ``path`` atomically (a temporary file in the same folder, then a rename)."""
    path = Path(path)
    try:                                     # the reader's checks: a file written here can be read back
        check_model_dict(model.to_dict())
    except ModelFileError as exc:
        raise TreegenError(f"cannot write model file {path}: {exc}") from None
    blob = (model.to_json() + "\n").encode("utf-8")
    if len(blob) > MAX_MODEL_BYTES:
        raise TreegenError(f"model is too large for a model file ({bytes_text(len(blob))}; at most "
                           f"{bytes_text(MAX_MODEL_BYTES)})")
    try:
        atomic_write(path, blob)
    except OSError as exc:
        raise TreegenError(f"cannot write model file {path}: {exc.strerror or exc}") from None
    return path


def load(path: str | Path) -> Model:
    """Read a model file (``-`` = standard input, read once); every problem is one
    :class:`ModelFileError` line ``MODEL: <field>: <problem>``."""
    name = "standard input" if str(path) == "-" else str(path)
    try:
        if str(path) == "-":
            import sys
            raw = read_bounded(sys.stdin.buffer, MAX_MODEL_BYTES, name, ModelFileError)
        else:
            with open(path, "rb") as fh:
                raw = read_bounded(fh, MAX_MODEL_BYTES, name, ModelFileError)
        text = raw.decode("utf-8-sig")
    except FileNotFoundError:
        raise ModelFileError(f"model file not found: {path}") from None
    except (OSError, UnicodeDecodeError, AttributeError) as exc:
        raise ModelFileError(f"cannot read model file {name}: {getattr(exc, 'strerror', None) or exc}") from None
    return from_json(text, name)


def from_json(text: str, name: str = "model") -> Model:
    """Parse and check the text of a model file; ``name`` starts every error message."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{name}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise ModelFileError(f"{name}: nested too deeply") from None
    except ValueError as exc:   # e.g. an integer of more than 4300 digits
        raise ModelFileError(f"{name}: {' '.join(str(exc).split())}") from None
    try:
        return Model.from_dict(d)
    except ModelFileError as exc:
        raise ModelFileError(f"{name}: {exc}") from None
    except RecursionError:   # a hostile structure in a field the schema does not walk
        raise ModelFileError(f"{name}: nested too deeply") from None
