"""Generated corrupt model files: a small valid model and seeded JSON mutations of it.

Shared by the loader fuzz test and the CLI corpus test. Everything is deterministic (seeded).
"""

from __future__ import annotations

import copy
import json
import random

import numpy as np

from treegen.core.model import Model
from treegen.core.scaling import InputScaling
from treegen.core.tree import LEAF, Tree

# values a hostile or broken file may hold where a number, a list or a string is expected
HOSTILE = [
    -1, 0, 1, 2, 3, 7, -2, 2**31, 3_000_000_000, 2**63, -(2**63) - 1, 10**26, 10**30, 1.5, -0.5, 2.0, 1e26, 1e30,
    1e308, -1e308, float("nan"), float("inf"), -float("inf"), True, False, None, "", "1", "x" * 5000, [], [1], [[[]]],
    {}, {"a": 1}, 5e-324,
]


def small_model() -> Model:
    """A 3-feature, 3-class oblique tree of 5 nodes with minmax scaling (a zero scale included)."""
    tree = Tree(
        weights=np.array([[0.5, -0.25, 0.0], [0, 0, 0], [0.0, 1.0, 0.125], [0, 0, 0], [0, 0, 0]]),
        threshold=np.array([0.3, 0, 0.6, 0, 0]),
        left=np.array([1, LEAF, 3, LEAF, LEAF]),
        right=np.array([2, LEAF, 4, LEAF, LEAF]),
        leaf_class=np.array([0, 0, 1, 1, 2]),
        class_counts=np.array([[5, 4, 3], [5, 0, 0], [0, 4, 3], [0, 4, 0], [0, 0, 3]]),
    ).validate()
    scaling = InputScaling(np.array([0.0, -1.0, 2.0]), np.array([0.5, 0.25, 0.0]), "minmax")
    return Model(trees=[tree], feature_names=["a", "b", "c"], classes=[1, 2, "three"], scaling=scaling,
                 metadata={"algorithm": "efti", "train_accuracy": 0.9, "n_train": 12})


def _paths(obj, prefix=()):
    """Every (path, value) inside a JSON object, containers included."""
    out = [(prefix, obj)]
    stack = [(prefix, obj)]
    while stack:
        path, value = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for k, v in items:
            out.append((path + (k,), v))
            stack.append((path + (k,), v))
    return out


def _random_path(d, rng: random.Random) -> tuple:
    """A random non-empty path into ``d`` (a random descent that stops with probability 1/4 per level)."""
    path: tuple = ()
    node = d
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
        if not keys or (path and rng.random() < 0.25):
            return path if path else (rng.choice(list(d)),)
        k = rng.choice(keys)
        path += (k,)
        node = node[k]


def _parent(obj, path):
    for k in path[:-1]:
        obj = obj[k]
    return obj


class Nest:
    """``value`` wrapped in ``depth`` arrays, written by :func:`dumps` as text (no deep Python object)."""

    def __init__(self, value, depth: int):
        self.value, self.depth = value, depth


def mutate(d: dict, rng: random.Random) -> dict:
    """One to three random mutations of a model dict (a copy)."""
    d = json.loads(json.dumps(d))
    nests = []
    for _ in range(rng.randint(1, 3)):
        path = _random_path(d, rng)
        parent = _parent(d, path)
        key = path[-1]
        op = rng.randrange(8)
        if op <= 2:                                            # replace by a hostile value
            parent[key] = copy.deepcopy(rng.choice(HOSTILE))
        elif op == 3:                                          # delete
            del parent[key]
        elif op == 4 and isinstance(parent[key], list):        # shorten or lengthen a list
            if parent[key] and rng.random() < 0.5:
                parent[key].pop(rng.randrange(len(parent[key])))
            else:
                parent[key].append(copy.deepcopy(rng.choice(parent[key]) if parent[key] else 0))
        elif op == 5 and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
            parent[key] = parent[key] + rng.choice([-1, 1, 0.5, 10**20])      # off by one / fraction / huge
        elif op == 6:                                          # wrap in nesting (deep: applied last)
            nests.append((parent, key, rng.choice([2, 50, 3000])))
        else:                                                  # swap with another value of the same parent
            if isinstance(parent, list) and len(parent) > 1:
                j = rng.randrange(len(parent))
                parent[key], parent[j] = parent[j], parent[key]
            elif isinstance(parent, dict):
                parent[rng.choice(["extra", key])] = rng.choice(HOSTILE)
    for i, (parent, key, depth) in enumerate(nests):
        try:
            inner = parent[key]
        except (KeyError, IndexError):
            continue
        parent[key] = Nest(inner, depth)
    return d


def dumps(d) -> str:
    """JSON text of ``d``; :class:`Nest` values written as deeply nested arrays (json.dumps would recurse)."""
    nests: list[Nest] = []

    def default(obj):
        if isinstance(obj, Nest):
            nests.append(obj)
            return f"@@NEST{len(nests) - 1}@@"
        raise TypeError(type(obj).__name__)

    text = json.dumps(d, default=default)
    for i in reversed(range(len(nests))):
        n = nests[i]
        text = text.replace(f'"@@NEST{i}@@"', "[" * n.depth + dumps(n.value) + "]" * n.depth)
    return text


# the cases of the issue, by name: (field path, value)
NAMED = {
    "child index 3e9": (("trees", 0, "left", 0), 3_000_000_000),
    "child index 1e26": (("trees", 0, "right", 0), 10**26),
    "child index 1.5": (("trees", 0, "left", 0), 1.5),
    "class count 1e30": (("trees", 0, "class_counts", 1, 0), 10**30),
    "scale 0 on a q15 model": (("scaling",), {"method": "q15", "offset": [0, 0, 0], "scale": [0.0, 2**-15, 2**-15]}),
    "negative scale": (("scaling", "scale", 0), -0.5),
    "unknown scaling method": (("scaling", "method"), "log"),
    "feature count 2**40": (("trees", 0, "n_features"), 2**40),
    "train accuracy as a list": (("metadata", "train_accuracy"), [1]),
    "boolean child": (("trees", 0, "left", 0), True),
}


def named_case(name: str) -> str:
    path, value = NAMED[name]
    d = small_model().to_dict()
    _parent(d, path)[path[-1]] = value
    return dumps(d)


def huge_integer_case() -> str:
    """A 5000-digit integer (Python refuses to parse more than 4300 digits by default)."""
    return small_model().to_json().replace('"n_train": 12', '"n_train": ' + "9" * 5000)


def deep_nesting_case() -> str:
    """Threshold list replaced by 100,000 nested arrays."""
    d = small_model().to_dict()
    d["trees"][0]["threshold"] = Nest([], 100_000)
    return dumps(d)
