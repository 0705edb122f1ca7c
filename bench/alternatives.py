"""treegen's alternative tree inducers side by side: test accuracy, tree size, training time.

Two protocols:

``--protocol split``  the protocol of the DE-PDT paper (shared/seeds/004_*.txt): ``--runs`` random
                      85/15 train/test splits (split r drawn from seed r, the same splits for every
                      algorithm); mean, min, max and std of the test accuracy, printed beside the
                      paper's Table 2 (its PDT column and its J48 / BFTree figures) where the dataset
                      is one of the paper's.
``--protocol node``   where DE-split pays off: the time of ONE split (the root, ``max_depth=1``) on
                      synthetic data of growing rows x attributes (``--sizes``), for ``cart``
                      (sorted scan of every attribute), ``de-cart`` (Separation Measure + threshold
                      DE on one attribute) and ``cart-naive`` (only where rows <= ``--naive-max``,
                      default 2000: it is O(attributes * rows**2)).
``--protocol cv``     repeated stratified K-fold CV (default 5x2, as ``treegen cv``); test accuracy
                      with its 95 % CI, leaves, training time, and the training time of every
                      algorithm as a fraction of its *exhaustive* baseline measured in the same run
                      (``de-cart`` -> ``cart``, ``de-id3`` -> ``id3``, and both against the naive
                      enumeration modes ``cart-naive`` / ``id3-naive`` when those are run too). For a
                      DE-split algorithm the table says whether its mean accuracy lies within the
                      95 % CI of its exhaustive baseline's mean.

Algorithms are looked up by name in :data:`ALGOS`: every treegen algorithm (``treegen.ALGORITHMS``)
plus bench-only entries — ``cart-naive`` / ``id3-naive`` (exhaustive cut-point enumeration that counts
the classes on each side of every candidate cut afresh, ``O(attributes * rows * cuts)`` per node: what
the DE-split paper's "enumeration search" costs; same trees as ``cart`` / numeric ``id3`` up to
ties) and ``sk-entropy`` (scikit-learn's entropy tree, if installed). Adding an algorithm (``rf``,
``gp``, ...) is one entry in ``ALGOS``; per-algorithm options with ``--param ALGO:KEY=VALUE``.

Examples::

    python bench/alternatives.py --algos de-pdt,efti,cart --datasets irs,gls,son --protocol split --runs 30
    python bench/alternatives.py --algos de-cart,cart,de-id3,id3,cart-naive,id3-naive \\
        --datasets veh,seg,w40,pen --protocol cv

Results: ``bench/results/alternatives_<protocol>[_<tag>].md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from joblib import Parallel, delayed

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from shared_data import load_raw  # noqa: E402

from treegen.core.metrics import mean_ci95  # noqa: E402
from treegen.core.tree import LEAF  # noqa: E402
from treegen.learn.cv import stratified_fold_ids  # noqa: E402
from treegen.learn.estimators import ALGORITHMS, TreeClassifier, make_estimator  # noqa: E402
from treegen.learn.inducers import cart as cart_mod  # noqa: E402

RESULTS = HERE / "results"

# Table 2 of the DE-PDT paper (test accuracy, 85/15 split, 30 runs): PDT min, mean, std, max; J48; BFTree
PAPER_TABLE2 = {
    "irs": {"pdt_min": 0.8261, "pdt_mean": 0.9435, "pdt_std": 0.0305, "pdt_max": 0.9565, "j48": 0.8695,
            "bftree": 0.8695},
    "gls": {"pdt_min": 0.4242, "pdt_mean": 0.5808, "pdt_std": 0.0690, "pdt_max": 0.6667, "j48": 0.6969,
            "bftree": 0.7575},
    "son": {"pdt_min": 0.6563, "pdt_mean": 0.7729, "pdt_std": 0.0614, "pdt_max": 0.9063, "j48": 0.5312,
            "bftree": 0.625},
}


# ---------------------------------------------------------------------------------------- naive enumeration
def _impurity(counts: np.ndarray, criterion: str) -> np.ndarray:
    n = counts.sum(axis=-1, keepdims=True).astype(np.float64)
    p = counts / np.maximum(n, 1.0)
    if criterion == "gini":
        return 1.0 - np.sum(p * p, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.where(p > 0, np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return -np.sum(p * lg, axis=-1)


def naive_best_split(X: np.ndarray, y: np.ndarray, n_classes: int, criterion: str, chunk: int = 256):
    """Every attribute, every midpoint between consecutive distinct values; the class counts on each
    side are recounted from all rows for every candidate (no sorting, no prefix sums)."""
    n, A = X.shape
    onehot = np.zeros((n, n_classes))
    onehot[np.arange(n), y] = 1.0
    total = onehot.sum(axis=0)
    parent = float(_impurity(total[None, :], criterion)[0])
    best = None
    for f in range(A):
        v = np.unique(X[:, f])
        if v.size < 2:
            continue
        cuts = v[:-1] / 2.0 + v[1:] / 2.0
        for s in range(0, cuts.size, chunk):
            c = cuts[s:s + chunk]
            left_mask = X[:, f][None, :] <= c[:, None]                    # (cuts, rows): a full pass each
            left = left_mask.astype(np.float64) @ onehot
            right = total - left
            nl, nr = left.sum(axis=1), right.sum(axis=1)
            gain = parent - (nl * _impurity(left, criterion) + nr * _impurity(right, criterion)) / n
            k = int(np.argmax(gain))
            if best is None or gain[k] > best[0] + 1e-12:
                best = (float(gain[k]), f, float(c[k]))
    return best


class NaiveExhaustiveTree(TreeClassifier):
    """Bench only: a CART/ID3-style tree grown with :func:`naive_best_split` (numeric attributes)."""

    algorithm = "naive"

    def __init__(self, *, criterion: str = "gini", max_depth: int | None = None, random_state: int | None = None):
        self.criterion = criterion
        self.max_depth = max_depth
        self.random_state = random_state

    def _induce_depth1(self, X, y, n_classes):
        self.max_depth = 1
        return self._induce(X, y, n_classes)

    def _induce(self, X, y, n_classes):
        N, A = X.shape
        feature, threshold, left, right, counts_l = [], [], [], [], []
        limit = self.max_depth if self.max_depth is not None else N
        stack = [(np.arange(N), -1, True, 0)]
        while stack:
            rows, parent, is_left, depth = stack.pop()
            node = len(feature)
            if parent >= 0:
                (left if is_left else right)[parent] = node
            counts = np.bincount(y[rows], minlength=n_classes)
            feature.append(LEAF)
            threshold.append(0.0)
            left.append(LEAF)
            right.append(LEAF)
            counts_l.append(counts)
            if counts.max() == rows.size or depth >= limit:
                continue
            split = naive_best_split(X[rows], y[rows], n_classes, self.criterion)
            if split is None or (self.criterion == "entropy" and split[0] <= 1e-12):
                continue
            _, f, thr = split
            feature[node], threshold[node] = f, thr
            mask = X[rows, f] <= thr
            stack.append((rows[~mask], node, False, depth + 1))
            stack.append((rows[mask], node, True, depth + 1))
        counts = np.array(counts_l, dtype=np.int64)
        g = {"feature": np.array(feature), "threshold": np.array(threshold), "left": np.array(left),
             "right": np.array(right), "counts": counts, "n_samples": counts.sum(axis=1),
             "impurity": np.zeros(len(feature)), "n_features": A}
        tree = cart_mod._to_tree(g, None)
        return tree, {"n_leaves": tree.n_leaves}


class SklearnEntropyTree:
    """scikit-learn's DecisionTreeClassifier(criterion='entropy'), for comparison with id3."""

    def __init__(self, random_state=None, **params):
        from sklearn.tree import DecisionTreeClassifier

        self.est = DecisionTreeClassifier(criterion="entropy", random_state=random_state, **params)

    def fit(self, X, y):
        self.est.fit(X, y)
        return self

    def predict(self, X):
        return self.est.predict(X)

    @property
    def n_leaves(self) -> int:
        return int(self.est.get_n_leaves())


# ---------------------------------------------------------------------------------------- registry
@dataclass
class Algo:
    """How the bench makes an estimator: ``make(seed, **params)`` -> object with fit / predict and either
    ``tree_`` (treegen) or ``n_leaves``; ``baselines``: algorithms whose time is the reference."""
    make: Callable
    baselines: tuple = ()
    note: str = ""
    params: dict = field(default_factory=dict)


def _treegen(name: str) -> Callable:
    def make(seed, **params):
        est = make_estimator(name, **params)
        if "random_state" in est._param_names():
            est.set_params(random_state=seed)
        return est
    return make


ALGOS: dict[str, Algo] = {name: Algo(_treegen(name)) for name in ALGORITHMS}
ALGOS["de-cart"].baselines = ("cart", "cart-naive")
ALGOS["de-id3"].baselines = ("id3", "id3-naive")
ALGOS["cart"].baselines = ("cart-naive",)
ALGOS["id3"].baselines = ("id3-naive",)
ALGOS["cart-naive"] = Algo(lambda seed, **p: NaiveExhaustiveTree(criterion="gini", random_state=seed, **p),
                           note="bench only: Gini, naive cut-point enumeration")
ALGOS["id3-naive"] = Algo(lambda seed, **p: NaiveExhaustiveTree(criterion="entropy", random_state=seed, **p),
                          note="bench only: entropy, naive cut-point enumeration")
ALGOS["sk-entropy"] = Algo(lambda seed, **p: SklearnEntropyTree(random_state=seed, **p),
                           note="scikit-learn DecisionTreeClassifier(criterion='entropy')")


def _leaves(est) -> int:
    tree = getattr(est, "tree_", None)
    if tree is not None and hasattr(tree, "n_leaves"):
        return int(tree.n_leaves)
    return int(est.n_leaves)


# ---------------------------------------------------------------------------------------- tasks
def split_tasks(y: np.ndarray, runs: int, test_fraction: float = 0.15, seed_base: int = 0):
    """``runs`` random splits (run r from numpy PCG64 seed ``seed_base + r``): (run, train, test).

    ``ceil(test_fraction * n)`` test rows, the DE-PDT paper's split sizes: its Table 2 accuracies are
    multiples of 1/32 on son (21/32, 29/32), 1/23 on irs (19/23, 22/23) and 1/33 on gls (14/33, 22/33),
    and its Table 3 training errors multiples of 1/176, 1/127 and 1/181 (= n - ceil(0.15 n)).
    """
    n = y.shape[0]
    n_test = math.ceil(test_fraction * n - 1e-9)
    out = []
    for r in range(runs):
        perm = np.random.default_rng(seed_base + r).permutation(n)
        out.append((r, np.sort(perm[n_test:]), np.sort(perm[:n_test])))
    return out


def cv_tasks(y: np.ndarray, folds: int, repeats: int):
    out = []
    for r in range(repeats):
        fold_of = stratified_fold_ids(y, folds, np.random.default_rng(r))
        for f in range(folds):
            out.append((r * folds + f, np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)))
    return out


def run_one(algo: str, params: dict, X, y, task) -> dict:
    run, train, test = task
    est = ALGOS[algo].make(1000 + run, **params)
    t0 = time.perf_counter()
    est.fit(X[train], y[train])
    seconds = time.perf_counter() - t0
    acc = float(np.mean(np.asarray(est.predict(X[test])) == y[test]))
    rec = {"run": run, "accuracy": acc, "leaves": _leaves(est), "train_seconds": seconds}
    info = getattr(est, "fit_info_", None) or {}
    for key in ("complete_leaves", "pruned_leaves", "train_errors", "de_nodes", "enumerated_nodes"):
        if key in info:
            rec[key] = info[key]
    return rec


def summarise(records: list[dict]) -> dict:
    acc = np.array([r["accuracy"] for r in records])
    mean, ci = mean_ci95(acc.tolist())
    return {"n": len(records), "acc_mean": float(acc.mean()), "acc_min": float(acc.min()),
            "acc_max": float(acc.max()), "acc_std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0,
            "acc_ci95": float(ci), "leaves_mean": float(np.mean([r["leaves"] for r in records])),
            "train_seconds": float(np.sum([r["train_seconds"] for r in records]))}


# ---------------------------------------------------------------------------------------- reports
def split_report(results: dict, algos: list[str], datasets: list[str]) -> str:
    lines = ["| dataset | algorithm | runs | mean (std) | min | max | leaves | train s/run | paper PDT min / mean (std) / max | paper J48 / BFTree | mean >= paper PDT mean |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in datasets:
        paper = PAPER_TABLE2.get(d)
        for a in algos:
            s = results[d][a]["summary"]
            ref = (f"{paper['pdt_min']:.4f} / {paper['pdt_mean']:.4f} ({paper['pdt_std']:.4f}) / {paper['pdt_max']:.4f}"
                   if paper else "-")
            other = f"{paper['j48']:.4f} / {paper['bftree']:.4f}" if paper else "-"
            meets = ("yes" if s["acc_mean"] >= paper["pdt_mean"] else "no") if paper else "-"
            lines.append(f"| {d} | {a} | {s['n']} | {s['acc_mean']:.4f} ({s['acc_std']:.4f}) | {s['acc_min']:.4f} | "
                         f"{s['acc_max']:.4f} | {s['leaves_mean']:.1f} | {s['train_seconds'] / s['n']:.3f} | "
                         f"{ref} | {other} | {meets} |")
    return "\n".join(lines)


def cv_report(results: dict, algos: list[str], datasets: list[str]) -> str:
    lines = ["| dataset | algorithm | test accuracy % (95 % CI) | leaves | train s (all folds) | time / baseline | within baseline's CI |",
             "|---|---|---|---|---|---|---|"]
    for d in datasets:
        for a in algos:
            s = results[d][a]["summary"]
            fracs, within = [], []
            for b in ALGOS[a].baselines:
                if b in results[d]:
                    sb = results[d][b]["summary"]
                    fracs.append(f"{s['train_seconds'] / sb['train_seconds']:.3g} x {b}")
                    if a.startswith("de-") and not b.endswith("-naive"):
                        ok = abs(s["acc_mean"] - sb["acc_mean"]) <= sb["acc_ci95"]
                        within.append(f"{'yes' if ok else 'no'} ({b} {100 * sb['acc_mean']:.2f} ± "
                                      f"{100 * sb['acc_ci95']:.2f})")
            lines.append(f"| {d} | {a} | {100 * s['acc_mean']:.2f} ± {100 * s['acc_ci95']:.2f} | "
                         f"{s['leaves_mean']:.1f} | {s['train_seconds']:.3f} | {'; '.join(fracs) or '-'} | "
                         f"{'; '.join(within) or '-'} |")
    return "\n".join(lines)


def node_scaling(sizes: list[tuple[int, int]], naive_max: int, repeats: int = 3) -> list[dict]:
    """Seconds of one root split (best of ``repeats``) per algorithm and size; 3 classes from a noisy
    linear rule on the first two attributes, values on the Q15 grid."""
    from treegen.learn.inducers import cart as cart_ind
    from treegen.learn.inducers import de_split

    rows = []
    for n, A in sizes:
        rng = np.random.default_rng(n + A)
        X = rng.integers(0, 32768, (n, A)) / 32768.0
        score = X[:, 0] + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
        y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).astype(np.int64)
        runs = {
            "cart": lambda: cart_ind.induce(X, y, 3, max_depth=1),
            "de-cart": lambda: de_split.induce(X, y, 3, de_split.DESplitParams(max_depth=1), seed=1),
        }
        if n <= naive_max:
            runs["cart-naive"] = lambda: NaiveExhaustiveTree()._induce_depth1(X, y, 3)
        rec = {"rows": n, "attributes": A}
        for name, fn in runs.items():
            best = math.inf
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - t0)
            rec[name] = best
        rows.append(rec)
        print(f"rows {n:7d} attributes {A:4d}  " + "  ".join(f"{k} {v * 1e3:9.2f} ms" for k, v in rec.items()
                                                             if k not in ("rows", "attributes")), flush=True)
    return rows


def node_report(rows: list[dict]) -> str:
    lines = ["| rows | attributes | cart ms | de-cart ms | cart-naive ms | de-cart / cart | de-cart / cart-naive |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        naive = r.get("cart-naive")
        naive_ms = "-" if naive is None else f"{1e3 * naive:.1f}"
        vs_naive = "-" if naive is None else f"{r['de-cart'] / naive:.3g}"
        lines.append(f"| {r['rows']} | {r['attributes']} | {1e3 * r['cart']:.2f} | {1e3 * r['de-cart']:.2f} | "
                     f"{naive_ms} | {r['de-cart'] / r['cart']:.3g} | {vs_naive} |")
    return "\n".join(lines)


def parse_params(items: list[str]) -> dict:
    out: dict = {}
    for item in items or []:
        try:
            algo, kv = item.split(":", 1)
            key, value = kv.split("=", 1)
        except ValueError:
            raise SystemExit(f"--param expects ALGO:KEY=VALUE, got {item!r}") from None
        try:
            val = json.loads(value)
        except json.JSONDecodeError:
            val = value
        out.setdefault(algo, {})[key] = val
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", default="", help=f"comma-separated, from: {', '.join(ALGOS)}")
    p.add_argument("--datasets", default="irs,gls,son", help="shared dataset names (default irs,gls,son)")
    p.add_argument("--protocol", choices=("split", "cv", "node"), default="split")
    p.add_argument("--sizes", default="1000x10,1000x100,2000x40,10000x10,10000x100,100000x10,100000x100",
                   help="node: ROWSxATTRIBUTES list")
    p.add_argument("--naive-max", type=int, default=2000, help="node: largest row count run naively")
    p.add_argument("--runs", type=int, default=30, help="split: random 85/15 splits (default 30)")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--param", action="append", metavar="ALGO:KEY=VALUE", help="estimator option (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="parallel tasks (joblib)")
    p.add_argument("--tag", default="", help="suffix of the result files")
    args = p.parse_args(argv)
    command = "python bench/alternatives.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.protocol == "node":
        sizes = [tuple(int(v) for v in item.split("x")) for item in args.sizes.split(",")]
        rows = node_scaling(sizes, args.naive_max)
        report = node_report(rows)
        RESULTS.mkdir(exist_ok=True)
        stem = f"alternatives_node{'_' + args.tag if args.tag else ''}"
        text = (f"# Alternatives bench (node): time of one root split\n\nCommand: `{command}`\n\n"
                "Synthetic data, 3 classes from a noisy linear rule on the first two attributes; best of 3 runs.\n\n")
        (RESULTS / f"{stem}.md").write_text(text + report + "\n")
        (RESULTS / f"{stem}.json").write_text(json.dumps({"command": command, "rows": rows}, indent=1))
        print(report)
        return 0
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    unknown = [a for a in algos if a not in ALGOS]
    if unknown:
        p.error(f"unknown algorithm(s) {', '.join(unknown)} (choose from {', '.join(ALGOS)})")
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    params = parse_params(args.param)
    results: dict = {}
    t_start = time.perf_counter()
    for d in datasets:
        Xraw, labels = load_raw(d)
        _, y = np.unique(labels, return_inverse=True)
        X = Xraw.astype(np.float64)
        tasks = split_tasks(y, args.runs) if args.protocol == "split" else cv_tasks(y, args.folds, args.repeats)
        results[d] = {}
        for a in algos:
            t0 = time.perf_counter()
            recs = Parallel(n_jobs=args.jobs)(delayed(run_one)(a, params.get(a, {}), X, y, t) for t in tasks)
            results[d][a] = {"records": recs, "summary": summarise(recs), "params": params.get(a, {})}
            s = results[d][a]["summary"]
            print(f"{d:8s} {a:11s} acc {100 * s['acc_mean']:6.2f} ± {100 * s['acc_ci95']:5.2f} "
                  f"[{100 * s['acc_min']:.2f}, {100 * s['acc_max']:.2f}]  leaves {s['leaves_mean']:6.1f}  "
                  f"train {s['train_seconds']:8.2f} s  (wall {time.perf_counter() - t0:.1f} s)", flush=True)
    report = split_report(results, algos, datasets) if args.protocol == "split" else cv_report(results, algos, datasets)
    proto = (f"{args.runs} random 85/15 splits (run r: numpy PCG64 seed r; ceil(0.15 n) test rows, the paper's "
             f"split sizes), estimator seed 1000 + r"
             if args.protocol == "split" else
             f"stratified {args.folds}-fold CV x {args.repeats} repetitions (treegen.learn.cv fold assignment)")
    header = [f"# Alternatives bench ({args.protocol})", "", f"Command: `{command}`", "", f"Protocol: {proto}.",
              f"Parameters: {json.dumps(params) if params else 'defaults'}; wall time {time.perf_counter() - t_start:.0f} s.",
              ""]
    RESULTS.mkdir(exist_ok=True)
    stem = f"alternatives_{args.protocol}{'_' + args.tag if args.tag else ''}"
    (RESULTS / f"{stem}.md").write_text("\n".join(header) + report + "\n")
    (RESULTS / f"{stem}.json").write_text(json.dumps({"command": command, "protocol": args.protocol,
                                                       "params": params, "results": results}, indent=1))
    print()
    print(report)
    print(f"\nwritten {RESULTS / (stem + '.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
