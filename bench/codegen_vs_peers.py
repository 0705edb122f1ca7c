"""treegen's generated C beside emlearn and m2cgen, for the same scikit-learn trees, on Cortex-M4/M33/M55.

Usage::

    pip install -e '.[peers]'            # emlearn 0.23.2, m2cgen 0.10.0
    python bench/codegen_vs_peers.py [--datasets breast_cancer,bcw,ttt,pid] [--base-rows 8]
                                     [--targets qemu-m4,qemu-m33,qemu-m55]
                                     [--out bench/results/codegen_vs_peers] [--keep DIR]
    python bench/codegen_vs_peers.py --boosted [--trees 100]   # XGBoost / LightGBM: bench/boosted.py peers

For every dataset one ``sklearn.tree.DecisionTreeClassifier(random_state=0)`` (gini, fully grown)
is fitted on all rows: scikit-learn's ``breast_cancer`` (float data) and the shared ``bcw``, ``ttt``,
``pid`` (integers 0..32767). Each tree is turned into C by

- treegen (``treegen.importers.sklearn.from_sklearn`` + ``treegen.emit.export.export_model``, the
  generic target of the board's core: cortex-m4 / cortex-m33 / cortex-m55, variant auto): layouts ``table`` / ``unrolled`` x dtypes ``q15`` (``tg_<n>_predict_q15``, int16 Q15
  input scaled on the host) / ``f32`` (``tg_<n>_predict_f32``, raw float input); plus ``unrolled q15``
  through ``tg_<n>_predict`` (raw float input, Q15 scaling on the device);
- emlearn 0.23.2 ``method="inline"`` with ``dtype="int16_t"`` (input: raw values cast to int16_t, as
  emlearn's own float wrapper does) and ``dtype="float"``;
- m2cgen 0.10.0 ``export_to_c`` (double input; ``score`` + an argmax wrapper, since m2cgen returns
  class probabilities).

Measured, never asserted:

- agreement with scikit-learn's ``predict``, computed on the target (QEMU) from the predictions the
  compiled code prints: on the training rows, and on *threshold rows* -- for each split (feature f,
  threshold t) of the tree, ``--base-rows`` training rows with x_f set to the nearest input values
  on either side of t (integer data: floor(t) and floor(t)+1; float data: the largest float32 <= t
  and the smallest float32 > t). Every implementation gets these values exactly (the Q15 path via
  the model's input scaling on the host).
- flash bytes on Cortex-M4 (arm-none-eabi-gcc, the target's flags ``-mcpu=cortex-m4 -mthumb
  -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os`` + ``-ffunction-sections -fdata-sections``, linked with
  ``--gc-sections``): a program calling the model once is linked beside the same program calling a
  trivial stub; the flash figure is the total size of the symbols the model build adds -- the
  model's code and tables and any library helpers it pulls in (soft-float double routines for
  m2cgen). Alignment padding is left out: the raw image delta (JSON ``flash_image_delta_bytes``)
  moves by up to ~60 bytes with the placement of a 64-byte-aligned newlib routine.
- instructions per inference on QEMU ``mps2-an386`` (Cortex-M4), ``mps2-an505`` (Cortex-M33) and
  ``mps3-an547`` (Cortex-M55) -- the ``--targets`` -- with ``-icount shift=0`` and SysTick on the CPU
  clock (bench/qemu; 40 / 50 / 31.25 instructions per tick): mean over the training rows, each
  predicted once, net of the empty-call loop (the call of the model function itself is included).
  Flash and agreement are measured on every board too (each core's own flags). The first target's
  figures are the main table (JSON ``results``), the others follow (JSON ``targets``).
  These trees are axis-parallel: no multiply-accumulate, so the DSP/MVE variants do not apply
  (bench/hil_bench.py compares scalar/DSP/MVE on oblique EFTI trees).

Writes ``OUT.md`` and ``OUT.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "bench" / "qemu"))
import harness  # noqa: E402
from peers import C_TYPES, c_literal, git_commit, peer_c, tool_version  # noqa: E402

DEFAULT_DATASETS = "breast_cancer,bcw,ttt,pid"
TREE_PARAMS = {"random_state": 0}
TARGET = "cortex-m4"
OPT = "-Os"

# name, label, input kind
IMPLEMENTATIONS = [
    ("treegen-table-q15", "treegen table q15", "q15"),
    ("treegen-unrolled-q15", "treegen unrolled q15", "q15"),
    ("treegen-table-f32", "treegen table f32", "float"),
    ("treegen-unrolled-f32", "treegen unrolled f32", "float"),
    ("treegen-unrolled-q15-raw", "treegen unrolled q15, raw float in (scaling on device)", "float"),
    ("emlearn-int16", "emlearn 0.23.2 inline int16", "int16"),
    ("emlearn-float", "emlearn 0.23.2 inline float", "float"),
    ("m2cgen-double", "m2cgen 0.10.0 C (double)", "double"),
]


# ---------------------------------------------------------------------------------------------- data
def load_dataset(name: str):
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        X, y = load_breast_cancer(return_X_y=True)
        return X.astype(np.float64), y, False
    data = np.loadtxt(SHARED / "datasets" / f"{name}.csv.gz", delimiter=",", skiprows=1, dtype=np.int64)
    return data[:, :-1].astype(np.float64), data[:, -1], True


def threshold_rows(clf, X: np.ndarray, integer: bool, base_rows: int, seed: int = 0) -> np.ndarray:
    """For each split, base_rows training rows with the split feature on either side of the threshold."""
    from treegen.core.tree import LEAF
    from treegen.importers.sklearn import f32_split

    rng = np.random.default_rng(seed)
    st = clf.tree_
    rows = []
    for node in np.flatnonzero(st.children_left != LEAF):
        f, t = int(st.feature[node]), float(st.threshold[node])
        if integer:
            values = [np.floor(t), np.floor(t) + 1]
        else:
            values = list(f32_split(t))
        base = X[rng.choice(X.shape[0], size=min(base_rows, X.shape[0]), replace=False)]
        for v in values:
            b = base.copy()
            b[:, f] = v
            rows.append(b)
    return np.vstack(rows)


# ---------------------------------------------------------------------------------------------- C text
def inputs_for(kind: str, rows: np.ndarray, model) -> np.ndarray:
    if kind == "q15":
        return model.scaling.to_q15(rows).astype(np.int64)
    if kind == "int16":
        return np.trunc(rows).astype(np.int16).astype(np.int64)  # C cast (int16_t)value: truncation
    if kind == "float":
        return rows.astype(np.float32)
    return rows


def write_rows(path: Path, kind: str, values: np.ndarray) -> None:
    lines = [f"#define TG_N_ROWS {values.shape[0]}u",
             f"static const {C_TYPES[kind]} tg_rows[TG_N_ROWS][TG_N_FEATURES] = {{"]
    for row in values:
        lines.append("    {" + ", ".join(c_literal(v, kind) for v in row) + "},")
    lines.append("};")
    path.write_text("\n".join(lines) + "\n")


def generate(impl: str, clf, model, name: str, n_features: int, out: Path,
             target: str = TARGET) -> tuple[list[Path], str]:
    """Write the model's C into ``out``; return (sources, bench_config.h text)."""
    out.mkdir(parents=True, exist_ok=True)
    if impl.startswith("treegen"):
        from treegen.emit.export import export_model

        _, layout, dtype = impl.split("-")[:3]
        export_model(model, out, target=target, layout=layout, dtype=dtype, name=name, measure=False)
        fn = {"q15": f"tg_{name}_predict_q15", "f32": f"tg_{name}_predict_f32"}[dtype]
        if impl.endswith("-raw"):
            fn = f"tg_{name}_predict"
        kind = "q15" if fn.endswith("_q15") else "float"
        config = (f'#include "{name}.h"\n#define TG_INPUT_T {C_TYPES[kind]}\n'
                  f"#define TG_N_FEATURES {n_features}\n#define TG_PREDICT(x) {fn}(x)\n")
        return [out / f"{name}.c"], config
    sources, config, _ = peer_c(impl, clf, name, n_features, out)
    return sources, config


# ---------------------------------------------------------------------------------------------- measure
def measure(impl: str, kind: str, clf, model, name: str, X: np.ndarray, T: np.ndarray, work: Path,
            board: "harness.Board" = harness.M4) -> dict:
    from treegen.core import targets

    d = work / impl
    sources, config = generate(impl, clf, model, name, X.shape[1], d, target=targets.get(board.name).core)
    (d / "bench_config.h").write_text(config)
    inc = [d]

    # flash: what the model adds to a program (model build vs stub build, same driver)
    elf_model = harness.build([harness.HERE / "driver_size.c", *sources], d / "size_model.elf", opt=OPT,
                              include_dirs=inc, board=board)
    elf_stub = harness.build([harness.HERE / "driver_size.c"], d / "size_stub.elf", opt=OPT, include_dirs=inc,
                             defines=["TG_STUB"], board=board)
    own = set()
    for src in sources:
        own |= harness.object_symbols(harness.compile_object(src, d / (src.stem + ".o"), opt=OPT, include_dirs=inc,
                                                             board=board))
    syms, stub_syms = harness.symbol_sizes(elf_model), harness.symbol_sizes(elf_stub)
    added = {s: n for s, n in syms.items() if n > stub_syms.get(s, 0)}
    helpers = sorted(s for s in added if s not in own)
    out = {
        "flash_bytes": sum(n - stub_syms.get(s, 0) for s, n in added.items()),
        "flash_symbols_bytes": sum(syms.get(s, 0) for s in own),
        "flash_image_delta_bytes": harness.section_sizes(elf_model)["flash"] - harness.section_sizes(elf_stub)["flash"],
        "library_helpers": helpers,
    }
    for rows_name, rows, timed in (("train", X, True), ("threshold", T, False)):
        write_rows(d / "bench_rows.h", kind, inputs_for(kind, rows, model))
        elf = harness.build([harness.HERE / "driver_predict.c", *sources], d / f"run_{rows_name}.elf", opt=OPT,
                            include_dirs=inc, defines=[f"TG_TIME={int(timed)}"], board=board)
        res = harness.run(elf, timeout=300, board=board)
        pred = np.array(res.predictions)
        expect = np.searchsorted(clf.classes_, clf.predict(rows))
        if pred.shape != expect.shape:
            raise harness.HarnessError(f"{impl}: {pred.shape[0]} predictions for {expect.shape[0]} rows")
        out[f"agree_{rows_name}_pct"] = 100.0 * float(np.mean(pred == expect))
        if timed:
            out["instructions_per_inference"] = round(res.instructions_per_call("predict"), 1)
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--boosted" in argv:        # imported boosted / regression models (issue #25): bench/boosted.py
        sys.path.insert(0, str(REPO / "bench"))
        import boosted
        return boosted.main(["peers", *(a for a in argv if a != "--boosted")])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=DEFAULT_DATASETS)
    ap.add_argument("--base-rows", type=int, default=8, help="training rows per threshold side (threshold rows)")
    ap.add_argument("--targets", default="qemu-m4,qemu-m33,qemu-m55",
                    help="emulated boards (treegen targets) to measure on; the first gives the main table")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "codegen_vs_peers"))
    ap.add_argument("--keep", default=None, help="keep the generated C and ELF files in this directory")
    args = ap.parse_args(argv)
    harness.require_tools()
    boards = [harness.board(t) for t in args.targets.split(",")]
    try:
        import emlearn  # noqa: F401
        import m2cgen  # noqa: F401
        import sklearn
        from sklearn.tree import DecisionTreeClassifier
    except ImportError as exc:
        print(f"codegen_vs_peers: {exc}; install the peers: pip install -e '.[peers]'", file=sys.stderr)
        return 2
    from importlib.metadata import version

    from treegen.core.version import __version__ as treegen_version
    from treegen.importers.sklearn import from_sklearn

    command = "python bench/codegen_vs_peers.py " + " ".join(
        a.replace(str(REPO) + "/", "") for a in (argv if argv is not None else sys.argv[1:]))
    work_ctx = tempfile.TemporaryDirectory(prefix="tg-peers-") if args.keep is None else None
    work = Path(work_ctx.name if work_ctx else args.keep)
    t_start = time.time()
    report = {
        "command": command.strip(),
        "tree": f"sklearn.tree.DecisionTreeClassifier({', '.join(f'{k}={v!r}' for k, v in TREE_PARAMS.items())}), "
                "fitted on all rows",
        "board": f"qemu-system-arm -M {boards[0].machine} {' '.join(harness.QEMU_ICOUNT)}",
        "cflags": " ".join([*boards[0].cpu_flags, OPT, *harness.COMMON_FLAGS, "-Wl,--gc-sections"]),
        "boards": {b.name: {"machine": b.machine, "cflags": " ".join([*b.cpu_flags, OPT]),
                            "instructions_per_tick": b.insns_per_tick} for b in boards},
        "versions": {
            "treegen_commit": git_commit(REPO), "python": platform.python_version(), "numpy": np.__version__,
            "scikit-learn": sklearn.__version__,
            "emlearn": version("emlearn"), "m2cgen": version("m2cgen"), "treegen": treegen_version,
            "gcc": tool_version([harness.CC, "--version"]), "qemu": tool_version([harness.QEMU, "--version"]),
        },
        "datasets": {},
    }
    for ds in args.datasets.split(","):
        X, y, integer = load_dataset(ds)
        clf = DecisionTreeClassifier(**TREE_PARAMS).fit(X, y)
        model = from_sklearn(clf, X=X)
        T = threshold_rows(clf, X, integer, args.base_rows)
        entry = {"rows": int(X.shape[0]), "features": int(X.shape[1]), "classes": int(len(clf.classes_)),
                 "leaves": int(clf.get_n_leaves()), "depth": int(clf.get_depth()), "threshold_rows": int(T.shape[0]),
                 "integer_data": integer, "treegen_scaling": model.scaling.method,
                 "treegen_unresolved_thresholds": model.metadata["unresolved_thresholds"], "results": {}}
        entry["targets"] = {}
        for b in boards:
            results = {}
            for impl, label, kind in IMPLEMENTATIONS:
                r = measure(impl, kind, clf, model, ds, X, T, work / ds / b.name, board=b)
                r["label"] = label
                results[impl] = r
                print(f"{ds:14s} {b.name:9s} {impl:26s} flash {r['flash_bytes']:6d} B  "
                      f"instr {r['instructions_per_inference']:8.1f}  agree train {r['agree_train_pct']:6.2f} %  "
                      f"threshold {r['agree_threshold_pct']:6.2f} %", file=sys.stderr)
            if b is boards[0]:
                entry["results"] = results
            else:
                entry["targets"][b.name] = results
        report["datasets"][ds] = entry
    report["seconds"] = round(time.time() - t_start, 1)
    if work_ctx:
        work_ctx.cleanup()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    md = render_markdown(report)
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0


def render_markdown(report: dict) -> str:
    v = report["versions"]
    lines = [
        "# Generated C for the same scikit-learn trees: treegen vs emlearn vs m2cgen (Cortex-M4, M33, M55)",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Produced by treegen {v['treegen']} at commit {v.get('treegen_commit', '?')}; Python {v['python']}, "
        f"numpy {v.get('numpy', '?')}, scikit-learn {v['scikit-learn']}, emlearn {v['emlearn']}, "
        f"m2cgen {v['m2cgen']}.",
        "",
        f"- Tree: `{report['tree']}`; scikit-learn {v['scikit-learn']}, emlearn {v['emlearn']}, "
        f"m2cgen {v['m2cgen']}, treegen {v['treegen']}.",
        f"- Flash: linked bytes (`{report['cflags']}`): sized symbols a model build adds over a stub build "
        "(code + tables + library helpers pulled in), alignment padding excluded; in brackets the model's own "
        "symbols only (without library helpers).",
        f"- Instructions: `{report['board']}`, SysTick on the CPU clock; mean per inference over the "
        "training rows, net of the call loop. gcc: " + v["gcc"] + "; " + v["qemu"] + ".",
        "- Agreement with scikit-learn's `predict`, from the predictions printed by the code running in QEMU: "
        "training rows, and threshold rows (each split's feature set to the nearest input values on either "
        "side of its threshold, in base training rows).",
        "- Inputs: treegen q15 = int16 Q15 from the model's input scaling (on the host); treegen f32 and "
        "'raw float in' = raw float32; emlearn int16 = raw value cast to int16_t (truncation, as emlearn's "
        "wrapper does); emlearn float = float32; m2cgen = double.",
        "",
    ]
    for ds, e in report["datasets"].items():
        lines += [
            f"## {ds} ({e['rows']} rows, {e['features']} features, {e['classes']} classes; tree: {e['leaves']} leaves, "
            f"depth {e['depth']}; {e['threshold_rows']} threshold rows; treegen scaling {e['treegen_scaling']})",
            "",
            "| implementation | flash B (own symbols) | instructions / inference | agree train % | agree threshold % |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in e["results"].values():
            lines.append(f"| {r['label']} | {r['flash_bytes']} ({r['flash_symbols_bytes']}) | "
                         f"{r['instructions_per_inference']:.1f} | {r['agree_train_pct']:.2f} | "
                         f"{r['agree_threshold_pct']:.2f} |")
        lines.append("")
    others = sorted({t for e in report["datasets"].values() for t in e.get("targets", {})})
    if others:
        boards = report.get("boards", {})
        names = ", ".join(f"{t} ({boards.get(t, {}).get('machine', '?')})" for t in others)
        lines += [f"## Other cores: {names}", "",
                  "Same trees and implementations, each core's own flags ("
                  + "; ".join(f"{t}: `{boards[t]['cflags']}`" for t in others if t in boards)
                  + "); instructions per inference, flash bytes in brackets, agreement on training / threshold "
                  "rows.", "",
                  "| dataset | implementation | " + " | ".join(others) + " |",
                  "|---|---|" + "---:|" * len(others)]
        for ds, e in report["datasets"].items():
            for impl, r0 in e["results"].items():
                cells = []
                for t in others:
                    r = e.get("targets", {}).get(t, {}).get(impl)
                    cells.append("-" if r is None else f"{r['instructions_per_inference']:.1f} ({r['flash_bytes']}); "
                                 f"{r['agree_train_pct']:.2f} / {r['agree_threshold_pct']:.2f} %")
                lines.append(f"| {ds} | {r0['label']} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(f"Total run time {report['seconds']} s.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
