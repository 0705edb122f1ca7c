"""Fuzzing the model loader: 10,000 seeded JSON mutations of a valid model file (a case count, not a
time box). Every case must either load as a model that is exactly what the file says, or fail with
one :class:`ModelFileError` line naming the field; nothing else (no other exception, no traceback)."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from corrupt_models import dumps, mutate, small_model
from treegen.core import schema
from treegen.core.errors import ModelFileError
from treegen.core.model import from_json

N_CASES = 10_000


def _strict_equal(a, b) -> bool:
    """JSON values equal with types respected (True is not 1, 1.5 is not 1; an integer in a float field
    compares as the float64 it is read as)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):   # a float field written as an integer
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_strict_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _check_accepted(model, d: dict) -> None:
    """An accepted file: the model says exactly what the file says, and is usable."""
    out = model.to_dict()
    for key in ("feature_names", "classes", "trees"):
        assert _strict_equal(out[key], d[key]), key
    scaling = dict(d["scaling"])
    scaling.setdefault("method", "minmax")
    assert _strict_equal(out["scaling"], scaling)
    assert scaling["method"] in schema.SCALING_METHODS
    for s in scaling["scale"]:
        assert s > 0 or (s == 0 and scaling["method"] == "minmax")
    for t in d["trees"]:
        for child in t["left"] + t["right"]:
            assert type(child) is int and -1 <= child < len(t["left"])
        for row in t["class_counts"]:
            assert all(type(c) is int and 0 <= c <= schema.MAX_COUNT for c in row)
        assert all(math.isfinite(v) for row in t["weights"] for v in row)
    model.validate()
    X = np.random.default_rng(0).uniform(-3, 3, size=(8, model.n_features))
    model.predict(X)
    model.hash()
    from_json(model.to_json())


def test_loader_fuzz_10000_mutations():
    base = small_model().to_dict()
    rng = random.Random(20261126)
    accepted = rejected = 0
    for case in range(N_CASES):
        d = mutate(base, rng)
        text = dumps(d)
        try:
            model = from_json(text, "fuzz.json")
        except ModelFileError as exc:
            msg = str(exc)
            assert "\n" not in msg and msg.startswith("fuzz.json"), (case, msg)
            rejected += 1
            continue
        except Exception as exc:  # noqa: BLE001 - any other exception is the failure being fuzzed for
            pytest.fail(f"case {case}: {type(exc).__name__}: {str(exc)[:300]} for {text[:300]}")
        try:
            _check_accepted(model, json.loads(text))
        except AssertionError as exc:
            pytest.fail(f"case {case}: accepted an invalid model ({exc}): {text[:400]}")
        accepted += 1
    assert accepted + rejected == N_CASES
    # the mutations must exercise both outcomes, or the fuzzer is not testing anything
    assert rejected > N_CASES // 2 and accepted > 100, (accepted, rejected)
