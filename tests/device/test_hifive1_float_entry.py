"""The float entry point (``tg_<n>_predict(const float *)``) executed by the FE310's RV32IMAC core
(QEMU sifive_e, the machine qemu-hifive1 runs the hifive1 image on), compiled with the hifive1
target's compiler and flags: the class of every float32 input within +-64 ulps of every decision
boundary equals the host fixed-point model's (treegen.device.hil.reference, what HIL compares PREDICT
with). The HIL protocol carries Q15 rows; this checks the float -> Q15 path on the same core.

For every internal node, data row and feature with a non-zero weight: the Q15 value q* that puts the
row on the node's boundary (axis trees, CART: the node's threshold; oblique trees, EFTI: its
hyperplane), and +-64 ulps around the float32 inputs where the feature's Q15 value steps at q*-1, q*
and q*+1 (f32_axis_splits), the other features from the data row.

FAILS (never skips) when riscv64-unknown-elf-gcc or qemu-system-riscv32 is missing (scripts/setup.sh).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from export_models import require, run_cc

from treegen import CARTClassifier, EFTIClassifier
from treegen.core import targets
from treegen.device.hil import reference
from treegen.emit.export import STRICT_CFLAGS, export_model
from treegen.emit.lower_f32 import f32_axis_splits, f32_of_ordinals, f32_ordinals

TESTS = Path(__file__).resolve().parents[1]
ULPS = 64
# picolibc's semihosting crt0 and libc (file I/O to the host), the hifive1 image's memory map
RV_RUN = ("--oslib=semihost", "--crt0=hosted", "-Wl,--defsym=__flash=0x20400000", "-Wl,--defsym=__flash_size=0x400000",
          "-Wl,--defsym=__ram=0x80000000", "-Wl,--defsym=__ram_size=0x4000")
QEMU_RV = ("-M", "sifive_e", "-bios", "none", "-display", "none", "-monitor", "none", "-serial", "none",
           "-icount", "shift=0,align=off,sleep=off", "-semihosting-config", "enable=on,target=native", "-kernel")


def _data(n: int = 150):
    rng = np.random.default_rng(11)
    X = np.column_stack([rng.uniform(-3.0, 9.0, n), rng.normal(0.0, 0.01, n), rng.uniform(100, 900, n)])
    y = (X[:, 0] + 300 * X[:, 1] > 2.5).astype(int) + (X[:, 2] > 520).astype(int)
    return X, y


def _ulp_walk(values: np.ndarray) -> np.ndarray:
    """Every float32 within +-ULPS ulps of each value (bit-pattern neighbours, finite values only)."""
    walk = (f32_ordinals(values)[:, None] + np.arange(-ULPS, ULPS + 1)[None, :]).ravel()
    out = f32_of_ordinals(walk)
    return out[np.isfinite(out)]


def boundary_rows(model, X: np.ndarray) -> np.ndarray:
    """Raw float32 rows within +-ULPS ulps of the decision boundaries: for every internal node, row of
    ``X`` and feature with a non-zero weight, the Q15 value q* putting the row on the node's hyperplane
    (an axis test: its threshold), and the float32 inputs where that feature's Q15 value steps from
    q*-1, q*, q*+1 to the next (f32_axis_splits: exactly where the float entry's result may change)."""
    sc = model.scaling
    base = np.asarray(X, dtype=np.float32)
    z = sc.transform(base.astype(np.float64))
    rows = []
    for tree in model.trees:
        for i in np.flatnonzero(tree.left >= 0):
            w = tree.weights[i]
            for f in np.flatnonzero(w):
                zf = (tree.threshold[i] - z @ w + z[:, f] * w[f]) / w[f]
                for r, q in zip(base, np.floor(zf * 32768.0).astype(np.int64)):
                    T = np.clip(np.array([q - 1, q, q + 1]), -1, 32767)
                    ops, t = f32_axis_splits(np.full(3, sc.offset[f]), np.full(3, sc.scale[f]), T)
                    walk = _ulp_walk(t[np.isin(ops, ["le", "gt"])])
                    block = np.repeat(r[None, :], walk.size, axis=0)
                    block[:, f] = walk
                    rows.append(block)
    return np.concatenate(rows).astype(np.float32)


@pytest.mark.parametrize("algo", ["cart", "efti"])
def test_float_entry_on_the_fe310_core_equals_the_host(algo, tmp_path):
    qemu = require("qemu-system-riscv32")
    tgt = targets.get("hifive1")
    cc = require(tgt.cc)
    X, y = _data()
    est = CARTClassifier(max_depth=4) if algo == "cart" else EFTIClassifier(max_iter=3000, random_state=2)
    model = est.fit(X, y).model_
    rows = boundary_rows(model, X[:4])
    assert rows.shape[0] > 20 * (2 * ULPS + 1)
    export_model(model, tmp_path, target="hifive1", name="demo", measure=False)
    (tmp_path / "in.bin").write_bytes(rows.tobytes())
    exe = tmp_path / "predict.elf"
    run_cc([cc, *tgt.cflags, *STRICT_CFLAGS, *RV_RUN, '-DTG_HEADER="demo.h"', "-DTG_PREDICT=tg_demo_predict",
            f"-DTG_N_FEATURES={model.n_features}", '-DTG_IN_PATH="in.bin"', '-DTG_OUT_PATH="out.bin"',
            "-I", str(tmp_path), str(tmp_path / "demo.c"), str(TESTS / "c" / "tg_predict_stream.c"), "-o", str(exe)])
    proc = subprocess.run([qemu, *QEMU_RV, str(exe)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.uint8).astype(np.int64)
    want = reference(model, X_raw=rows.astype(np.float64)).fixed
    assert got.shape == want.shape
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(rows[i].tolist(), int(got[i]), int(want[i])) for i in bad[:5]]
    # the walks cross the boundaries: the class changes inside some of them (15 of 144 CART walks, 16
    # of 84 EFTI walks here)
    walks = want.reshape(-1, 2 * ULPS + 1)
    assert np.count_nonzero(walks.min(axis=1) != walks.max(axis=1)) >= 5
