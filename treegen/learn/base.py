"""The estimator base: the scikit-learn contract every treegen classifier shares.

:class:`TreeClassifier` carries everything that does not depend on the algorithm — parameters
(keyword-only ``__init__`` that only stores them, ``get_params`` / ``set_params`` / ``repr``, so
``sklearn.base.clone`` works), validation at ``fit``, the seed (``seed_``), input scaling, label
encoding, the fitted attributes (``model_``, ``tree_``, ``classes_``, ``n_features_in_``,
``feature_names_in_``, ``scaling_``, ``fit_info_``, ``n_iter_``), the model object with its
metadata, ``predict`` / ``predict_proba`` / ``score``, ``feature_importances_`` and scikit-learn's
tags. An algorithm's class (:mod:`treegen.learn.estimators`) states only its parameters, its
inducer call (:meth:`TreeClassifier._induce`) and its own checks.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys

from pathlib import Path

import numpy as np

from treegen.core.errors import DataError, TreegenError
from treegen.core.model import Model
from treegen.core.scaling import InputScaling
from treegen.core.tree import Tree
from treegen.core.version import __version__
from treegen.learn.validation import check_X, check_y, column_names


class NotFittedError(TreegenError, AttributeError):
    """``predict`` called before ``fit``.

    When scikit-learn is already loaded, the error raised is also an instance of
    ``sklearn.exceptions.NotFittedError`` (see :func:`_not_fitted_error`).
    """


_SKLEARN_NOT_FITTED: type | None = None


def _not_fitted_error(message: str) -> Exception:
    """A :class:`NotFittedError`; when scikit-learn has been imported by the caller, one that is
    also sklearn's ``NotFittedError`` (what sklearn tools expect). scikit-learn is never imported here."""
    global _SKLEARN_NOT_FITTED
    sk_exceptions = sys.modules.get("sklearn.exceptions")
    sk_cls = getattr(sk_exceptions, "NotFittedError", None)
    if isinstance(sk_cls, type) and issubclass(sk_cls, Exception):
        if _SKLEARN_NOT_FITTED is None or not issubclass(_SKLEARN_NOT_FITTED, sk_cls):
            _SKLEARN_NOT_FITTED = type("NotFittedError", (NotFittedError, sk_cls), {"__module__": __name__})
        return _SKLEARN_NOT_FITTED(message)
    return NotFittedError(message)


def resolve_seed(random_state) -> int:
    """The seed a fit uses: ``random_state`` itself (an integer >= 0), or for ``None`` a fresh one
    drawn from the operating system's entropy (scikit-learn's meaning of ``None``: a new random run
    each time). The seed used is kept as ``seed_`` and in the model's ``metadata["seed"]``, so a run
    with ``random_state=None`` can be repeated exactly with ``random_state=est.seed_``."""
    if random_state is None:
        import secrets

        return secrets.randbits(32)
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)) or random_state < 0:
        raise TreegenError(f"random_state must be None or an integer >= 0, got {random_state!r}")
    return int(random_state)


def _is_plain(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


class TreeClassifier:
    """Base class: data validation, scaling, label encoding and the model object.

    Subclasses declare their parameters as the keyword-only arguments of ``__init__`` (whose body is
    ``self._store_params(locals())``) and implement :meth:`_induce`.
    """

    algorithm: str = ""
    #: the same tree whatever the seed (compare runs one fit per fold, not ``--runs-per-fold``)
    deterministic: bool = False

    # ------------------------------------------------------------------ params
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind == p.KEYWORD_ONLY]

    def _store_params(self, values: dict) -> None:
        """Store the keyword-only arguments of ``__init__`` unchanged, one attribute each (called as
        ``self._store_params(locals())``): scikit-learn's rule that ``__init__`` only stores its
        parameters, all checks waiting for ``fit``."""
        for name in self._param_names():
            setattr(self, name, values[name])

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> "TreeClassifier":
        valid = self._param_names()
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"invalid parameter {key!r} for {type(self).__name__}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if defaults.get(k) is not v and defaults.get(k) != v]
        return f"{type(self).__name__}({', '.join(changed)})"

    def _params_for(self, params_class, **overrides):
        """An inducer's parameter dataclass filled from this estimator: every field that is also a
        parameter of the estimator (same name, same meaning) from it, the rest from ``overrides``
        (else the dataclass's default)."""
        fields = {f.name for f in dataclasses.fields(params_class)}
        own = {k: v for k, v in self.get_params().items() if k in fields}
        return params_class(**{**own, **overrides})

    # ------------------------------------------------------------------ fit / predict
    def fit(self, X, y, feature_names: list[str] | None = None) -> "TreeClassifier":
        names_in = column_names(X)
        if feature_names is None:
            feature_names = names_in
        X = check_X(X)
        classes, y_idx, n_out = self._check_targets(y, X.shape[0])
        names_given = feature_names is not None
        if feature_names is None:
            feature_names = [f"x{i}" for i in range(X.shape[1])]
        if len(feature_names) != X.shape[1]:
            raise DataError(f"{len(feature_names)} feature names given for {X.shape[1]} features")
        self.seed_ = resolve_seed(getattr(self, "random_state", None))
        scaling = InputScaling.fit(X, getattr(self, "scaling", "auto"))
        Xn = scaling.transform(X)
        Xi, yi, distilled = self._distilled(Xn, y_idx, n_out, scaling, classes)
        induced, info = self._induce(Xi, yi, n_out)
        info.update(distilled)
        trees = induced if isinstance(induced, list) else [induced]
        for tree in trees:
            tree.validate()
        model = self._make_model(trees, list(map(str, feature_names)), classes, scaling)
        model.metadata = {
            "algorithm": self.algorithm,
            "params": {k: v for k, v in self.get_params().items() if _is_plain(v)},
            "seed": self.seed_,
            "n_train": int(X.shape[0]),
            **self._train_scores(model, Xn, y_idx),
            "treegen_version": __version__,
            **info,
        }
        if classes is not None:
            self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        if names_given:
            # names the user gave (DataFrame string columns, as scikit-learn, or feature_names=)
            self.feature_names_in_ = np.asarray(list(map(str, feature_names)), dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.scaling_ = scaling
        self.tree_ = trees[0]
        self.fit_info_ = info
        if "max_iter" in self._param_names():
            self.n_iter_ = int(info.get("n_iter", info.get("iterations", self.max_iter)))
        self.model_ = model
        return self

    def _distilled(self, Xn, y, n_classes, scaling, classes) -> tuple:
        """The rows the inducer learns from: ``Xn, y`` as they are, or, for an estimator with a ``teacher``
        (:mod:`treegen.learn.distill`), with the teacher-labelled pseudo-samples added; plus what to record."""
        teacher = getattr(self, "teacher", None)
        if teacher is None:
            return Xn, y, {}
        from treegen.learn import distill

        if isinstance(teacher, (str, Path)) and str(teacher) not in distill.TEACHERS:
            from treegen.core.model import load

            teacher = load(teacher)              # a model file: any treegen or imported model
        return distill.distilled_rows(Xn, y, n_classes, teacher=teacher, samples=self.teacher_samples,
                                      seed=self.seed_, scaling=scaling, classes=classes)

    def _check_targets(self, y, n_rows: int) -> tuple:
        """``(classes, y as the inducer takes it, n_classes)``: the sorted classes and class indices."""
        classes, y_idx = check_y(y, n_rows, type(self).__name__)
        return classes, y_idx, classes.shape[0]

    def _make_model(self, trees: list[Tree], feature_names: list[str], classes, scaling: InputScaling) -> Model:
        return Model(trees, feature_names, classes.tolist(), scaling)

    def _train_scores(self, model: Model, Xn: np.ndarray, y: np.ndarray) -> dict:
        return {"train_accuracy": float(np.mean(model.predict_index_normalised(Xn) == y))}

    def _induce(self, X: np.ndarray, y: np.ndarray, n_classes: int) -> tuple[Tree | list[Tree], dict]:
        """The algorithm: normalised ``X``, class indices ``y`` -> the tree (or an ensemble's list of
        trees) and the fit information recorded in the model's metadata and ``fit_info_``."""
        raise NotImplementedError

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise _not_fitted_error(f"this {type(self).__name__} is not fitted yet; call fit() first")

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "model_")

    def _validate_X(self, X) -> np.ndarray:
        """``X`` for predict: the fitted number of features; a DataFrame's columns matched to
        ``feature_names_in_`` by name (reordered when only the order differs, else an error naming the
        missing and unexpected columns)."""
        self._check_fitted()
        names = column_names(X)
        X = check_X(X)
        if X.shape[1] != self.n_features_in_:
            raise DataError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                            f"{self.n_features_in_} features as input")
        fitted = getattr(self, "feature_names_in_", None)
        if names is not None and fitted is not None and names != list(fitted):
            fitted = list(fitted)
            if len(set(names)) == len(names) and set(names) == set(fitted):
                return X[:, [names.index(n) for n in fitted]]
            missing = [n for n in fitted if n not in names]
            extra = [n for n in names if n not in fitted]
            raise DataError(f"the columns of X do not match the feature names seen at fit (missing "
                            f"{', '.join(missing) or 'none'}; unexpected {', '.join(extra) or 'none'})")
        return X

    @property
    def feature_importances_(self) -> np.ndarray:
        """Impurity-based feature importances, ``(n_features_in_,)``, summing to 1.

        Axis-parallel trees: scikit-learn's mean decrease in impurity (the criterion the tree was
        grown with: Gini, or entropy for ``criterion='entropy'``, ID3 and DE-ID3). Oblique trees
        (EFTI, DE-PDT): each node's impurity decrease is shared among the features in proportion to
        the absolute weights of its test on the normalised inputs, ``|w_a| / sum_b |w_b|``. Forests
        average their trees'. See :meth:`treegen.core.tree.Tree.feature_importances`.
        """
        self._check_fitted()
        return self.model_.feature_importances(self._impurity_criterion())

    def _impurity_criterion(self) -> str:
        criterion = getattr(self, "criterion", None) or getattr(self, "_criterion", None)
        return criterion if criterion in ("gini", "entropy") else ("entropy" if self.algorithm == "id3" else "gini")

    def predict(self, X) -> np.ndarray:
        X = self._validate_X(X)
        return self.classes_[self.model_.predict_index(X)]

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities: the class-count frequencies of the training rows in the leaf each row
        reaches (one-hot of the leaf's class for an empty leaf).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``; ``argmax`` (first maximum) equals ``predict`` except
            for a leaf whose class is not its most frequent one (EFTI keeps a leaf's class when a
            mutation empties it).
        """
        X = self._validate_X(X)
        return self.model_.predict_proba(X)

    def score(self, X, y) -> float:
        return float(np.mean(self.predict(X) == np.asarray(y)))

    # sklearn >= 1.6 tag protocol (used only when scikit-learn is installed)
    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, Tags, TargetTags  # type: ignore

        tags = Tags(estimator_type="classifier", target_tags=TargetTags(required=True),
                    classifier_tags=ClassifierTags())
        return tags
