"""Imported scikit-learn trees and forests: agreement with scikit-learn on unseen rows, flash and
Cortex-M4 instructions, treegen beside emlearn, m2cgen and micromlgen.

Usage::

    pip install -e '.[peers]'           # emlearn 0.23.2, m2cgen 0.10.0, micromlgen
    python bench/import_exactness.py [--datasets breast_cancer,wine,iris,digits,wide,pid]
                                     [--random-rows 20000] [--trees 10] [--big-forest]
                                     [--out bench/results/import_exactness]
    python bench/import_exactness.py --boosted [...]   # boosted / regression families: bench/boosted.py exactness

Per dataset: a stratified 70/30 split (seed 0); ``DecisionTreeClassifier(random_state=0)`` and
``RandomForestClassifier(n_estimators=--trees, random_state=0)`` fitted on the training part;
imported with ``from_sklearn(est, X=X_train)`` (forests: soft vote, scikit-learn's ``predict``).
Datasets: scikit-learn's bundled ``breast_cancer``, ``wine``, ``iris``, ``digits`` (offline), ``wide``
(wine standardised, feature k times 10^(-3 + 6k/12): scales 1e-3 .. 1e3) and the shared ``pid``
(integers 0..32767: the integer input contract).

Row sets (every value a float32, as scikit-learn and the C see it):

- ``test``: the 30 % not trained on;
- ``random``: ``--random-rows`` rows uniform in the training range of every feature (seed 1);
- ``threshold``: for every split of every tree, two test rows with the split feature set to the
  largest float32 <= t and to the next float32 (the two inputs scikit-learn separates).

Models of the ``integer`` input contract (integer training data: ``digits``, ``pid``) get rows of
their contract: integer random rows, and floor(t), floor(t) + 1 as threshold values.

Agreement with scikit-learn's ``predict`` is computed from the host-compiled C (gcc -O2; the same
C as on the target) of every implementation: treegen ``f32`` (raw float32 in), treegen ``q15`` through
``tg_<n>_predict`` (raw float32 in, Q15 scaling on the device), emlearn 0.23.2 inline ``float`` and
``int16_t`` (raw values cast to int16_t, as emlearn's float wrapper does), m2cgen 0.10.0 (double; argmax
of its probabilities) and micromlgen (C++, float in). Flash and instructions: the bench/qemu harness
(arm-none-eabi-gcc ``-Os``, linked ``--gc-sections``; flash = sized symbols a model build adds over a
stub build, library helpers included; instructions = mean over the test rows on QEMU ``mps2-an386``
with ``-icount shift=0``). ``treegen q15 (Q15 in)`` is ``tg_<n>_predict_q15`` on Q15 rows scaled on the
host: the fast path when the caller already has Q15 data.

``--big-forest`` adds a 100-tree ``max_depth=12`` forest on ``digits`` (treegen f32 and q15 only):
compile, child index width, agreement.

Writes ``OUT.md`` and ``OUT.json``. Measured, never asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "bench" / "qemu"))
import harness  # noqa: E402
from peer_measure import measure  # noqa: E402
from peers import C_TYPES, peer_c, tool_version  # noqa: E402

DEFAULT_DATASETS = "breast_cancer,wine,iris,digits,wide,pid"
OPT = "-Os"
TARGET = "cortex-m4"

# name, label, input kind (float / double / int16 / q15)
IMPLEMENTATIONS = [
    ("treegen-table-f32", "treegen table f32", "float"),
    ("treegen-unrolled-f32", "treegen unrolled f32", "float"),
    ("treegen-table-q15", "treegen table q15 (raw float in)", "float"),
    ("treegen-unrolled-q15", "treegen unrolled q15 (raw float in)", "float"),
    ("treegen-table-q15-fast", "treegen table q15 (Q15 in)", "q15"),
    ("emlearn-float", "emlearn 0.23.2 inline float", "float"),
    ("emlearn-int16", "emlearn 0.23.2 inline int16", "int16"),
    ("m2cgen-double", "m2cgen 0.10.0 C (double)", "double"),
    ("micromlgen-float", "micromlgen C++ (float in)", "float"),
]
FLOAT_PEERS = ("emlearn-float", "m2cgen-double", "micromlgen-float")

# ---------------------------------------------------------------------------------------------- data
def load_dataset(name: str):
    from sklearn import datasets

    if name in ("breast_cancer", "wine", "iris", "digits"):
        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        return X.astype(np.float64), y
    if name == "wide":
        X, y = datasets.load_wine(return_X_y=True)
        X = (X - X.mean(axis=0)) / X.std(axis=0)
        scales = np.logspace(-3, 3, X.shape[1])
        return X * scales + 10 * scales, y
    data = np.loadtxt(SHARED / "datasets" / f"{name}.csv.gz", delimiter=",", skiprows=1, dtype=np.int64)
    return data[:, :-1].astype(np.float64), data[:, -1]


def row_sets(est, X_train, X_test, n_random: int, integer: bool = False) -> dict:
    """Test, random and threshold rows; for a model of the ``integer`` input contract (integer training
    data) the random rows are integers and the threshold rows floor(t) and floor(t) + 1."""
    from treegen.emit.quantize import f32_below_above

    rng = np.random.default_rng(1)
    lo, hi = X_train.min(axis=0), X_train.max(axis=0)
    R = rng.uniform(lo, hi, size=(n_random, X_train.shape[1]))
    if integer:
        R = np.rint(R)
    rows = []
    for sk in (est.estimators_ if hasattr(est, "estimators_") else [est]):
        st = sk.tree_
        for node in np.flatnonzero(st.children_left != -1):
            f = int(st.feature[node])
            below, above = f32_below_above(float(st.threshold[node]))
            if integer:
                below, above = np.floor(st.threshold[node]), np.floor(st.threshold[node]) + 1
            base = X_test[rng.integers(0, X_test.shape[0], size=2)].copy()
            base[0, f], base[1, f] = below, above
            rows.append(base)
    sets = {"test": X_test, "random": R, "threshold": np.vstack(rows)}
    return {k: v.astype(np.float32).astype(np.float64) for k, v in sets.items()}


# ---------------------------------------------------------------------------------------------- C text
def generate(impl: str, est, model, name: str, n_features: int, out: Path) -> tuple[list, str, list]:
    """Write the model's C into ``out``; return (sources, bench_config.h text, extra cflags)."""
    out.mkdir(parents=True, exist_ok=True)
    if impl.startswith("treegen"):
        from treegen.emit.export import export_model

        _, layout, dtype = impl.split("-")[:3]
        rep = export_model(model, out, target=TARGET, layout=layout, dtype=dtype, name=name, measure=False)
        fn = f"tg_{name}_predict_q15" if impl.endswith("-fast") else f"tg_{name}_predict"
        kind = "q15" if impl.endswith("-fast") else "float"
        config = (f'#include "{name}.h"\n#define TG_INPUT_T {C_TYPES[kind]}\n'
                  f"#define TG_N_FEATURES {n_features}\n#define TG_PREDICT(x) {fn}(x)\n")
        generate.last_report = rep
        return [out / f"{name}.c"], config, []
    return peer_c(impl, est, name, n_features, out)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--boosted" in argv:        # imported boosted / regression models (issue #25): bench/boosted.py
        sys.path.insert(0, str(REPO / "bench"))
        import boosted
        return boosted.main(["exactness", *(a for a in argv if a != "--boosted")])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=DEFAULT_DATASETS)
    ap.add_argument("--random-rows", type=int, default=20000)
    ap.add_argument("--trees", type=int, default=10, help="trees of the RandomForest")
    ap.add_argument("--big-forest", action="store_true", help="also a 100-tree depth-12 forest on digits")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "import_exactness"))
    ap.add_argument("--keep", default=None, help="keep the generated C and ELF files in this directory")
    args = ap.parse_args(argv)
    harness.require_tools()
    try:
        import emlearn  # noqa: F401
        import m2cgen  # noqa: F401
        import micromlgen  # noqa: F401
        import sklearn
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.model_selection import train_test_split
        from sklearn.tree import DecisionTreeClassifier
    except ImportError as exc:
        print(f"import_exactness: {exc}; install the peers: pip install -e '.[peers]'", file=sys.stderr)
        return 2
    from importlib.metadata import version

    from treegen.importers.sklearn import from_sklearn

    command = "python bench/import_exactness.py " + " ".join(
        a.replace(str(REPO) + "/", "") for a in (argv if argv is not None else sys.argv[1:]))
    work_ctx = tempfile.TemporaryDirectory(prefix="tg-exact-") if args.keep is None else None
    work = Path(work_ctx.name if work_ctx else args.keep)
    t0 = time.time()
    report = {
        "command": command.strip(),
        "board": f"qemu-system-arm -M {harness.BOARD} {' '.join(harness.QEMU_ICOUNT)}",
        "cflags": " ".join([*harness.CPU_FLAGS_M4, OPT, *harness.COMMON_FLAGS, "-Wl,--gc-sections"]),
        "versions": {"python": platform.python_version(), "scikit-learn": sklearn.__version__,
                     "emlearn": version("emlearn"), "m2cgen": version("m2cgen"), "micromlgen": version("micromlgen"),
                     "gcc": tool_version([harness.CC, "--version"]), "qemu": tool_version([harness.QEMU, "--version"])},
        "models": {},
    }
    estimators = {"tree": lambda: DecisionTreeClassifier(random_state=0),
                  "forest": lambda: RandomForestClassifier(n_estimators=args.trees, random_state=0)}
    for ds in args.datasets.split(","):
        X, y = load_dataset(ds)
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        for kind_name, make in estimators.items():
            est = make().fit(X_tr, y_tr)
            model = from_sklearn(est, X=X_tr)
            sets = row_sets(est, X_tr, X_te, args.random_rows, integer=model.contract == "integer")
            expect = {k: np.searchsorted(est.classes_, est.predict(v)) for k, v in sets.items()}
            key = f"{ds}-{kind_name}"
            entry = {"dataset": ds, "estimator": type(est).__name__, "rows_train": int(X_tr.shape[0]),
                     "features": int(X.shape[1]), "classes": int(len(est.classes_)),
                     "row_sets": {k: int(v.shape[0]) for k, v in sets.items()},
                     "input_contract": model.contract, "vote": model.vote if kind_name == "forest" else "-",
                     "thresholds": model.metadata["n_thresholds"],
                     "thresholds_off_grid": model.metadata["thresholds_off_grid"],
                     "leaves": int(sum(t.n_leaves for t in model.trees)), "results": {}}
            for impl, label, kind in IMPLEMENTATIONS:
                try:
                    r = measure(impl, kind, est, model, ds, sets, expect, work / key, generate)
                except (harness.HarnessError, subprocess.CalledProcessError) as exc:
                    r = {"error": str(exc).splitlines()[0][:300]}
                r["label"] = label
                entry["results"][impl] = r
                if "error" in r:
                    print(f"{key:22s} {impl:24s} ERROR {r['error']}", file=sys.stderr)
                else:
                    print(f"{key:22s} {impl:24s} flash {r['flash_bytes']:6d} B  instr "
                          f"{r['instructions_per_inference']:8.1f}  test {r['agree_test_pct']:6.2f}  random "
                          f"{r['agree_random_pct']:6.2f}  threshold {r['agree_threshold_pct']:6.2f}", file=sys.stderr)
            report["models"][key] = entry
    if args.big_forest:
        X, y = load_dataset("digits")
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        est = RandomForestClassifier(n_estimators=100, max_depth=12, random_state=0).fit(X_tr, y_tr)
        model = from_sklearn(est, X=X_tr)
        sets = row_sets(est, X_tr, X_te, args.random_rows, integer=model.contract == "integer")
        expect = {k: np.searchsorted(est.classes_, est.predict(v)) for k, v in sets.items()}
        entry = {"dataset": "digits", "estimator": "RandomForestClassifier(n_estimators=100, max_depth=12)",
                 "rows_train": int(X_tr.shape[0]), "features": 64, "classes": 10, "vote": model.vote,
                 "row_sets": {k: int(v.shape[0]) for k, v in sets.items()}, "input_contract": model.contract,
                 "thresholds": model.metadata["n_thresholds"],
                 "thresholds_off_grid": model.metadata["thresholds_off_grid"],
                 "leaves": int(sum(t.n_leaves for t in model.trees)), "results": {}}
        for impl, label, kind in IMPLEMENTATIONS[:4]:
            r = measure(impl, kind, est, model, "digits", sets, expect, work / "big", generate, target_runs=False)
            r["label"] = label
            entry["results"][impl] = r
            print(f"big-forest {impl:24s} test {r['agree_test_pct']:6.2f}  random {r['agree_random_pct']:6.2f}  "
                  f"threshold {r['agree_threshold_pct']:6.2f}  child ref {r['child_ref']}", file=sys.stderr)
        report["big_forest"] = entry
    report["seconds"] = round(time.time() - t0, 1)
    if work_ctx:
        work_ctx.cleanup()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    md = render_markdown(report)
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0


def _cell(r: dict, key: str, fmt: str) -> str:
    return format(r[key], fmt) if key in r and r[key] is not None else "-"


def render_markdown(report: dict) -> str:
    v = report["versions"]
    lines = [
        "# Imported scikit-learn trees and forests: agreement on unseen rows, flash, Cortex-M4 instructions",
        "",
        f"Command: `{report['command']}`",
        "",
        f"- scikit-learn {v['scikit-learn']}, emlearn {v['emlearn']}, m2cgen {v['m2cgen']}, "
        f"micromlgen {v['micromlgen']}; {v['gcc']}; {v['qemu']}.",
        "- Agreement with scikit-learn's `predict` (host-compiled C of each implementation, gcc -O2): test rows "
        "(30 % stratified split, not trained on), uniform random rows in the training range, threshold rows "
        "(every split: the two float32 inputs scikit-learn separates; integer-contract models: integer random "
        "rows and floor(t), floor(t)+1). `disagree` = rows that differ.",
        f"- Flash: linked bytes (`{report['cflags']}`) a model build adds over a stub build, library helpers "
        "(soft-float) included; instructions: mean per inference over the test rows on "
        f"`{report['board']}`; `test@M4` = agreement of the predictions printed on the target.",
        "",
    ]
    for key, e in report["models"].items():
        lines += [
            f"## {key}: {e['estimator']} ({e['rows_train']} training rows, {e['features']} features, "
            f"{e['classes']} classes, {e['leaves']} leaves; vote {e['vote']}; input contract {e['input_contract']}; "
            f"{e['thresholds_off_grid']} of {e['thresholds']} thresholds off the Q15 grid)",
            "",
            f"Rows: test {e['row_sets']['test']}, random {e['row_sets']['random']}, "
            f"threshold {e['row_sets']['threshold']}.",
            "",
            "| implementation | test % | random % | threshold % | disagree (t/r/th) | test@M4 % | flash B | "
            "instr / inference | treegen exact |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in e["results"].values():
            if "error" in r:
                lines.append(f"| {r['label']} | error: {r['error']} | | | | | | | |")
                continue
            lines.append(
                f"| {r['label']} | {r['agree_test_pct']:.2f} | {r['agree_random_pct']:.2f} | "
                f"{r['agree_threshold_pct']:.2f} | {r['disagree_test_rows']}/{r['disagree_random_rows']}/"
                f"{r['disagree_threshold_rows']} | {_cell(r, 'agree_test_on_target_pct', '.2f')} | "
                f"{_cell(r, 'flash_bytes', 'd')} | {_cell(r, 'instructions_per_inference', '.1f')} | "
                f"{'yes' if r.get('exact') else ('no' if 'exact' in r else '')} |")
        lines.append("")
    big = report.get("big_forest")
    if big:
        lines += [f"## Large forest: digits, {big['estimator']} ({big['leaves']} leaves, {big['thresholds']} "
                  "thresholds), host only", "",
                  "| implementation | test % | random % | threshold % | child reference type | exact |",
                  "|---|---:|---:|---:|---|---|"]
        for r in big["results"].values():
            lines.append(f"| {r['label']} | {r['agree_test_pct']:.2f} | {r['agree_random_pct']:.2f} | "
                         f"{r['agree_threshold_pct']:.2f} | {r['child_ref']} | {'yes' if r['exact'] else 'no'} |")
        lines.append("")
    lines.append(f"Total run time {report['seconds']} s.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
