"""Which dtype should ``treegen export`` choose by default for an imported float model (issue #34,
point 1)? f32 (the source's own float32 tests) against q15 (the Q15 grid), on the emulated Cortex-M4
(qemu-m4, mps2-an386, -icount) and Cortex-M3 (qemu-m3: no FPU): flash the model adds to a linked
image (arm-none-eabi-gcc -Os, --gc-sections, library helpers included) and instructions per
inference, and the agreement of each export with the source library on the test rows.

Models (breast_cancer, a stratified 70/30 split, seed 0): an XGBoost and a LightGBM binary classifier
(boosted, vote sum), a scikit-learn RandomForestClassifier and DecisionTreeClassifier, imported with
the training rows as ``--data``. The q15 boosted export has no float entry: its rows are given as
Q15 (scaled in Python), so its figure leaves out the scaling a caller would add; the tree exports'
q15 rows go through their float entry ``tg_<name>_predict`` (Q15 scaling included) and through
``tg_<name>_predict_q15`` (scaling excluded).

Usage::

    python bench/default_dtype.py [--trees 50] [--out bench/results/default_dtype]

Writes ``OUT.md`` and ``OUT.json``. Measured, never asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "qemu"))
sys.path.insert(0, str(REPO / "bench"))
import harness  # noqa: E402
from peers import c_literal  # noqa: E402

DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include "tg_bench.h"
#include "rows.h"
{include}
static __attribute__((noipa)) int call(uint32_t i)
{{
    {call}
}}

int main(void)
{{
    uint32_t i;

    tg_ticks_start();
    tg_bench_calibrate();
    for (i = 0; i < TG_N_ROWS; i++) {{
        printf("tg_pred %lu %d\n", (unsigned long)i, call(i));
    }}
    tg_bench_report("model", call, TG_N_ROWS, 20u * TG_N_ROWS);
    return 0;
}}
"""


def _rows_h(rows: np.ndarray, c_type: str) -> str:
    lines = [f"#define TG_N_ROWS {rows.shape[0]}u",
             f"static const {c_type} tg_rows[TG_N_ROWS][{rows.shape[1]}] = {{"]
    if c_type == "float":
        lines += ["    {" + ", ".join(c_literal(float(v), "float") for v in row) + "}," for row in rows]
    else:
        lines += ["    {" + ", ".join(str(int(v)) for v in row) + "}," for row in rows]
    return "\n".join(lines + ["};"]) + "\n"


def measure(d: Path, src_dir: Path, name: str, call: str, rows: np.ndarray, c_type: str, board) -> dict:
    """Flash the model adds (image with it minus the same driver calling nothing), instructions per
    call, and the classes the device computed."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "rows.h").write_text(_rows_h(rows, c_type))
    sizes = {}
    for with_model in (False, True):
        src = d / f"drv{int(with_model)}.c"
        src.write_text(DRIVER.format(include=f'#include "{name}.h"' if with_model else "",
                                     call=call if with_model else "return (int)tg_rows[i][0] > 0;"))
        elf = harness.build([src] + ([src_dir / f"{name}.c"] if with_model else []),
                            d / f"drv{int(with_model)}.elf", opt="-Os", include_dirs=[d, src_dir], board=board)
        sizes[with_model] = harness.section_sizes(elf)
    res = harness.run(d / "drv1.elf", board=board, timeout=600)
    return {"flash_bytes": sizes[True]["flash"] - sizes[False]["flash"],
            "instructions": round(res.instructions_per_call("model") - 0, 1),
            "classes": res.predictions}


def models(n_trees: int):
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split
    from sklearn.tree import DecisionTreeClassifier

    from treegen.importers import from_lightgbm, from_sklearn, from_xgboost

    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    xc = xgb.XGBClassifier(n_estimators=n_trees, max_depth=4, n_jobs=1, random_state=0).fit(Xtr, ytr)
    lc = lgb.LGBMClassifier(n_estimators=n_trees, num_leaves=15, verbose=-1, n_jobs=1, random_state=0).fit(Xtr, ytr)
    rf = RandomForestClassifier(n_estimators=n_trees // 5, max_depth=6, random_state=0).fit(Xtr, ytr)
    dt = DecisionTreeClassifier(max_depth=6, random_state=0).fit(Xtr, ytr)
    return Xtr, Xte.astype(np.float32).astype(np.float64), [
        ("XGBClassifier", xc, from_xgboost(xc, X=Xtr)), ("LGBMClassifier", lc, from_lightgbm(lc, X=Xtr)),
        ("RandomForestClassifier", rf, from_sklearn(rf, X=Xtr)),
        ("DecisionTreeClassifier", dt, from_sklearn(dt, X=Xtr))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--targets", default="qemu-m4,qemu-m3")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "default_dtype"))
    args = ap.parse_args(argv)
    import treegen
    from treegen.emit.options import default_dtype

    harness.require_tools()
    t0 = time.time()
    Xtr, Xte, ms = models(args.trees)
    rows_out = []
    for tname in args.targets.split(","):
        board = harness.board(tname)
        for label, est, model in ms:
            lib = est.predict(Xte.astype(np.float32))
            lib_idx = np.searchsorted(np.asarray(est.classes_), lib)
            for dtype in ("f32", "q15"):
                with tempfile.TemporaryDirectory(prefix="tg-dtype-") as tmp:
                    d = Path(tmp)
                    rep = treegen.export_model(model, d, target=tname, dtype=dtype, name="m", measure=False)
                    boosted = model.vote == "sum"
                    variants = [("float entry", "return tg_m_predict(tg_rows[i]);", Xte, "float")]
                    if dtype == "q15":
                        q = model.scaling.to_q15(Xte).astype(np.int16)
                        q15 = ("Q15 entry (rows pre-scaled)", "return tg_m_predict_q15(tg_rows[i]);", q, "int16_t")
                        variants = [q15] if boosted else variants + [q15]
                    for what, call, rows, c_type in variants:
                        r = measure(d / what.split()[0], d, "m", call, rows, c_type, board)
                        agree = float(np.mean(np.asarray(r.pop("classes")) == lib_idx))
                        rows_out.append({"target": tname, "model": label, "dtype": dtype, "entry": what,
                                         "exact": rep.exact, "agreement_test": agree,
                                         "default": default_dtype(model) == dtype, **r})
                        print(rows_out[-1], flush=True)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cmd = "python bench/default_dtype.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps({"command": cmd.strip(), "commit": commit, "rows": rows_out,
                                                    "seconds": round(time.time() - t0, 1)}, indent=1) + "\n")
    md = [f"# Default dtype of imported float models: f32 against q15 (issue #34)", "",
          f"`{cmd.strip()}` at commit {commit} ({time.time() - t0:.0f} s). breast_cancer, 30 % test rows "
          f"({Xte.shape[0]}), {args.trees} boosted trees (depth 4 / 15 leaves), a {args.trees // 5}-tree "
          "forest and a tree of depth 6. Flash: linked image with the model minus the same driver without "
          "it (-Os, --gc-sections). Instructions: per inference under QEMU -icount (mean of 20 passes). "
          "Agreement: the device's class against the library's `predict` on the test rows. `exact`: the "
          "export's guarantee for every float32 input.", "",
          "| target | model | dtype | entry | default | exact | flash bytes | instructions | agreement (test) |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows_out:
        md.append(f"| {r['target']} | {r['model']} | {r['dtype']} | {r['entry']} | {'yes' if r['default'] else ''} "
                  f"| {'yes' if r['exact'] else 'no'} | {r['flash_bytes']} | {r['instructions']:.0f} "
                  f"| {100 * r['agreement_test']:.2f} % |")
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
