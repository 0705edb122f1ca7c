"""Mutation check of treegen's own tests: apply realistic bugs one at a time and see whether the tests
mapped to each catch it (issue #32, acceptance 3).

    nice -n 10 python bench/mutations.py                   # every mutation, writes bench/results/mutations.md
    python bench/mutations.py --only boost-argmax-last-f32 --keep-going
    python bench/mutations.py --list

Each entry of :data:`MUTATIONS` is (name, layer, file, original snippet, mutated snippet, why, tests): the
snippet must occur exactly once in the file (else the entry is reported "stale", never silently
skipped). The checkout is copied (tracked files of ``git ls-files``, the shared datasets linked beside
it as in the repository's layout) into a temporary folder; each mutation is applied there, its mapped
tests run (``python -m pytest -x -q`` on the copy, its own PYTHONPATH), and the file is restored in a
``finally`` -- the working tree itself is never modified. A mutation is *caught* when pytest reports a
failure (exit status 1); exit status 0 is a *survivor*; any other status (collection error, timeout)
is reported as an error, not as caught. Before the mutations, every distinct test selection runs once
unmutated (one run, two pytest-xdist workers) and must pass (else the figure would be meaningless).

``EQUIVALENT`` names mutations shown not to change behaviour (each with its argument in ``why``): they
are run and reported, and counted apart.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "mutations.md"
TEST_TIMEOUT = 900     # seconds per test run


@dataclass(frozen=True)
class Mutation:
    name: str
    layer: str
    file: str
    original: str
    mutated: str
    why: str
    tests: tuple


def M(name, layer, file, original, mutated, why, *tests):
    return Mutation(name, layer, file, original, mutated, why, tuple(tests))


T_TIES = "tests/emit/test_boost_decision.py::test_c_class_is_the_library_class_on_exact_ties"
T_STICKY = "tests/emit/test_portable_scaling.py::test_sticky_bits_decide_constructed_cases"
T_LIBREF = "tests/device/test_hil_library_reference.py"
T_BOOSTED_IMPORT = "tests/importers/test_import_boosted.py"
T_PROBES = "tests/device/test_float_probes.py"
T_TICK = "tests/device/test_tick_delta.py"
T_LIMITS_TIMEOUT = "tests/reliability/test_limits.py::test_timeout_bounds_are_inclusive_at_the_limit_exclusive_at_zero"

MUTATIONS = [
    # ------------------------------------------------------------------ emit (generated C and its lowering)
    M("boost-argmax-last-f32", "emit", "templates/c/boost.c.j2",
      "        if (raw[k] > raw[best]) {", "        if (raw[k] >= raw[best]) {",
      "the boosted f32 C takes the last largest class on an exact tie (the libraries take the first)", T_TIES),
    M("boost-argmax-last-q15", "emit", "templates/c/boost_q15.c.j2",
      "        if (raw[k] > raw[best]) {", "        if (raw[k] >= raw[best]) {",
      "the boosted Q15 C takes the last largest class on a tie", T_TIES),
    M("scaling-shr-no-sticky", "emit", "templates/c/scaling.c.j2",
      "    return k <= 0 ? m : (m >> k) | ((m & ((UINT64_C(1) << k) - 1u)) != 0u ? 1u : 0u);",
      "    return k <= 0 ? m : (m >> k);",
      "the portable scaling's alignment shift drops its sticky bit (fl(x - offset) misrounds at ties)", T_STICKY),
    M("scaling-product-no-sticky", "emit", "templates/c/scaling.c.j2",
      "    d = (hi << 21) | (lo >> 43) | ((lo & ((UINT64_C(1) << 43) - 1u)) != 0u ? 1u : 0u);",
      "    d = (hi << 21) | (lo >> 43);",
      "the product's low 43 bits dropped instead of folded into a sticky bit (fl(d * scale) misrounds)", T_STICKY),
    M("scaling-shr-far-no-sticky", "emit", "templates/c/scaling.c.j2",
      "        return m != 0u ? 1u : 0u;", "        return 0u;",
      "EQUIVALENT: a shift beyond 63 bits leaves the smaller operand wholly below the 10 guard bits of the "
      "larger one, which are zero; its sticky 1 (or 0) then rounds back to the larger operand either way "
      "(x + 1 unit: remainder 1 < half; x - 1 unit: remainder 1023 > half, rounds up to x)",
      "tests/emit/test_portable_scaling.py"),
    M("boost-q15-plain-write", "emit", "treegen/emit/export_boost.py",
      '    texts = {out / f"{ident}.h": render("c/boost_q15.h.j2", ctx), out / f"{ident}.c": render("c/boost_q15.c.j2", ctx)}\n'
      "    check_overwrite(texts, force=force)\n    for path, text in texts.items():\n"
      "        write_generated(path, text, force=force)",
      '    texts = {out / f"{ident}.h": render("c/boost_q15.h.j2", ctx), out / f"{ident}.c": render("c/boost_q15.c.j2", ctx)}\n'
      "    for path, text in texts.items():\n        path.write_text(text)",
      "the boosted Q15 export writes with a plain write over a user's file",
      "tests/emit/test_export_over_user_files.py::test_export_never_replaces_a_users_file"),
    M("boost-q15-moved-constant", "emit", "treegen/emit/export_boost.py",
      "        acc_bits=32, exact=False, unresolved_rows=moved,", "        acc_bits=32, exact=False, unresolved_rows=[],",
      "the boosted Q15 export reports a constant 'no data rows take another branch'",
      "tests/emit/test_boost_q15_quantisation.py"),
    M("boost-decision-q-ceil", "emit", "treegen/emit/lower_boost.py",
      '    t = math.floor(scaled) if rule == ">" else math.ceil(scaled) - 1',
      '    t = math.ceil(scaled) if rule == ">" else math.ceil(scaled) - 1',
      "the Q15 binary decision threshold rounded the wrong way (class 1 only above the next integer)",
      "tests/emit/test_boost_decision.py"),
    M("boost-inf-as-flt-max", "emit", "treegen/emit/lower_boost.py",
      '        return "INFINITY" if v > 0 else "-INFINITY"', '        return "3.40282347e38f" if v > 0 else "-3.40282347e38f"',
      "the f32 C writes a +inf threshold as FLT_MAX: an input of +inf goes right where the library sends it left",
      T_LIBREF),
    M("f32-key-negative-order", "emit", "treegen/emit/lower_f32.py",
      "    key = np.where(b >= 0x80000000, 0xFFFFFFFF - b, b | 0x80000000)",
      "    key = np.where(b >= 0x80000000, b, b | 0x80000000)",
      "the f32 table layout's monotone key of a negative float32 reversed (negative thresholds misordered)",
      "tests/emit/test_export.py", "tests/emit/test_export_compile.py", "tests/emit/test_f32_negative_thresholds.py"),
    M("q15-weight-truncate", "emit", "treegen/emit/lower_fixed.py",
      "        wq = np.rint(np.ldexp(w, s)).astype(np.int64)", "        wq = np.trunc(np.ldexp(w, s)).astype(np.int64)",
      "oblique weights truncated instead of rounded to Q15",
      "tests/emit/test_quantize.py", "tests/emit/test_codegen_golden.py"),
    # ------------------------------------------------------------------ device (host side of HIL)
    M("probes-tile-columns", "device", "treegen/device/float_probes.py",
      "    rows[np.arange(rows.shape[0]), np.repeat(feat, steps.size)] = values.ravel()\n    return rows, int(feat.size)\n\n\ndef raw_",
      "    rows[np.arange(rows.shape[0]), np.tile(feat, steps.size)] = values.ravel()\n    return rows, int(feat.size)\n\n\ndef raw_",
      "float32 HIL probes of a Q15 model placed on the wrong feature columns (np.tile for np.repeat)", T_PROBES),
    M("raw-probes-wrong-feature", "device", "treegen/device/float_probes.py",
      "            pts[(int(feat[k]), float(np.float32(tree.raw_threshold[k])))] = None",
      "            pts[(int(feat[0]), float(np.float32(tree.raw_threshold[k])))] = None",
      "float32 HIL probes of an imported model all on the root's feature (testing 3 of 55 thresholds)", T_PROBES),
    M("raw-probes-skip-inf", "device", "treegen/device/float_probes.py",
      "            pts[(int(feat[k]), float(np.float32(tree.raw_threshold[k])))] = None",
      "            if np.isfinite(tree.raw_threshold[k]):\n"
      "                pts[(int(feat[k]), float(np.float32(tree.raw_threshold[k])))] = None",
      "--float-ulps skips infinite thresholds: +inf is never probed (with a correct import: see why)",
      T_LIBREF),
    M("hil-f32-reference-ir", "device", "treegen/device/hil_f32.py",
      "        vals = reference_raw(model, X).astype(dt)",
      "        vals = np.asarray(model.predict_value(X) if model.is_regression else model.decision_function(X),\n"
      "                          dtype=np.float64).reshape(X.shape[0], -1).astype(dt)",
      "HIL's float32 reference is treegen's tree IR instead of the library's arithmetic (a conversion bug "
      "then passes on both sides)", T_LIBREF),
    M("hil-mismatch-vs-float", "device", "treegen/device/hil.py",
      "            mism = int(np.count_nonzero(got != ref.fixed))", "            mism = int(np.count_nonzero(got != ref.floating))",
      "HIL counts mismatches against the float model, not the fixed-point model the device runs",
      "tests/device/test_hil.py", "tests/device/test_hil_boosted.py"),
    M("hil-agreement-on-grid", "device", "treegen/device/hil.py",
      "    if raw is None:\n        return np.asarray(model.predict_index_normalised(",
      "    if True:\n        return np.asarray(model.predict_index_normalised(",
      "HIL's float agreement measured against the float model on the Q15 grid (export's is on the raw rows)",
      "tests/device/test_hil_library_reference.py::test_export_and_hil_report_one_agreement_figure"),
    M("hil-timeout-zero", "device", "treegen/device/hil.py",
      "    if timeout <= 0:", "    if timeout < 0:", "run_hil accepts a timeout of 0 s", T_LIMITS_TIMEOUT),
    M("protocol-crc-poly", "device", "treegen/device/protocol.py",
      "            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)",
      "            crc = ((crc << 1) ^ 0x1201) if crc & 0x8000 else (crc << 1)",
      "the host's CRC-16 polynomial mistyped", "tests/device/test_protocol.py"),
    # ------------------------------------------------------------------ firmware templates
    M("harness-f32-trailing-bytes", "firmware", "templates/firmware/tg_harness.c",
      "    if (n_rows > max_rows || (uint32_t)tg_rx.len != 2u + (uint32_t)n_rows * 4u * (uint32_t)TG_GLUE_N_FEATURES) {",
      "    if (n_rows > max_rows || (uint32_t)tg_rx.len < 2u + (uint32_t)n_rows * 4u * (uint32_t)TG_GLUE_N_FEATURES) {",
      "PREDICT_RAW / PREDICT_F32 accept trailing bytes",
      "tests/device/test_native_harness.py::test_malformed_float32_batches_give_bad_payload"),
    M("harness-f32-no-max-rows", "firmware", "templates/firmware/tg_harness.c",
      "    if (n_rows > max_rows || (uint32_t)tg_rx.len != 2u + (uint32_t)n_rows * 4u * (uint32_t)TG_GLUE_N_FEATURES) {",
      "    if ((uint32_t)tg_rx.len != 2u + (uint32_t)n_rows * 4u * (uint32_t)TG_GLUE_N_FEATURES) {",
      "PREDICT_RAW / PREDICT_F32 do not bound n_rows by max_batch (a full frame overruns the reply buffer)",
      "tests/device/test_native_harness.py::test_malformed_float32_batches_give_bad_payload"),
    M("harness-q15-trailing-bytes", "firmware", "templates/firmware/tg_harness.c",
      "    if (*n_rows > max_rows || (uint32_t)tg_rx.len != 2u + (uint32_t)*n_rows * row_bytes) {",
      "    if (*n_rows > max_rows || (uint32_t)tg_rx.len < 2u + (uint32_t)*n_rows * row_bytes) {",
      "PREDICT (Q15) accepts trailing bytes", "tests/device/test_native_harness.py::test_bad_payloads_give_error_frames"),
    M("tick-delta-unmasked", "firmware", "templates/firmware/tg_tick_counter.h",
      "    uint32_t delta = (now - tg_last_ticks) & TG_TICK_MASK;", "    uint32_t delta = (now - tg_last_ticks);",
      "the SysTick delta unmasked across the 24-bit wrap", T_TICK),
    M("tick-ratio-rounding", "firmware", "templates/firmware/tg_tick_counter.h",
      "#define TG_QEMU_RATIO_Q8(ticks) ((((uint32_t)TG_CALIB_INSNS << 8) + (ticks) / 2u) / (ticks))",
      "#define TG_QEMU_RATIO_Q8(ticks) ((((uint32_t)TG_CALIB_INSNS << 8)) / (ticks))",
      "the QEMU instructions-per-tick ratio truncated instead of rounded", T_TICK),
    M("firmware-crc-poly", "firmware", "templates/firmware/tg_protocol.c",
      "            crc = (uint16_t)((uint16_t)(crc << 1) ^ 0x1021u);", "            crc = (uint16_t)((uint16_t)(crc << 1) ^ 0x1201u);",
      "the firmware's CRC-16 polynomial mistyped",
      "tests/device/test_native_harness.py::test_malformed_float32_batches_give_bad_payload"),
    # ------------------------------------------------------------------ importers
    M("import-inf-clipped", "importers", "treegen/importers/ensemble.py",
      "            out[node] = le_threshold(float(tree.threshold[node]), self.op)",
      "            out[node] = np.clip(le_threshold(float(tree.threshold[node]), self.op), -F32_MAX, F32_MAX)",
      "a library's +inf threshold stored as the largest finite float32 (+inf inputs go right)",
      T_BOOSTED_IMPORT + "::test_lightgbm_bit_equal", T_LIBREF),
    M("import-lt-as-le", "importers", "treegen/importers/ensemble.py",
      "        if down == t:\n            return float(np.nextafter(np.float32(t), np.float32(-np.inf)))",
      "        if down == t:\n            return down",
      "XGBoost's x < t stored as x <= t (an input equal to the threshold goes left)",
      T_BOOSTED_IMPORT + "::test_xgboost_bit_equal", T_BOOSTED_IMPORT + "::test_le_threshold_exact"),
    M("import-missing-direction", "importers", "treegen/importers/ensemble.py",
      "                go_left = np.where(nan, self.missing_left[nd], go_left)",
      "                go_left = np.where(nan, ~self.missing_left[nd], go_left)",
      "NaN routed against the library's default direction", T_BOOSTED_IMPORT + "::test_xgboost_bit_equal"),
    M("import-sum-double", "importers", "treegen/importers/ensemble.py",
      "            acc[:, t.output] = acc[:, t.output] + t.value[t.leaves(X, self.op)].astype(dt)",
      "            acc[:, t.output] = acc[:, t.output] + t.value[t.leaves(X, self.op)]",
      "EQUIVALENT: XGBoost's float32 sum with each addition done in binary64 and then rounded to float32 -- "
      "double rounding is innocuous for + when the wider format has >= 2p + 2 bits (53 >= 2 * 24 + 2): "
      "fl32(fl64(a + b)) == fl32(a + b) for float32 a, b, so the sums are the same bit for bit",
      T_BOOSTED_IMPORT + "::test_xgboost_bit_equal"),
    M("import-gb-rule", "importers", "treegen/importers/sklearn_values.py",
      'sum_dtype="float64", binary_rule=">=", feature_names=names, metadata=meta)',
      'sum_dtype="float64", binary_rule=">", feature_names=names, metadata=meta)',
      "GradientBoostingClassifier's raw >= 0 rule taken as raw > 0",
      "tests/emit/test_boost_decision.py::test_sklearn_gradient_boosting_raw_zero_is_class_1"),
    M("model-file-inf-sign", "importers", "treegen/core/tree.py",
      '            d["raw_threshold"] = [v if math.isfinite(v) else ("inf" if v > 0 else "-inf")',
      '            d["raw_threshold"] = [v if math.isfinite(v) else ("-inf" if v > 0 else "inf")',
      "the model file writes an infinite raw threshold with the wrong sign",
      T_BOOSTED_IMPORT + "::test_lightgbm_bit_equal"),
    # ------------------------------------------------------------------ learn
    M("oob-regression-in-bag", "learn", "treegen/learn/forest.py",
      "            acc[out] += tree.predict_value(X[out])", "            acc[bag] += tree.predict_value(X[bag])",
      "a regression forest's OOB R² computed on the in-bag rows (0.34 -> 0.70)",
      "tests/learn/test_forest.py::test_regression_oob_r2_equals_an_independent_recount"),
    M("oob-classification-in-bag", "learn", "treegen/learn/forest.py",
      "            acc[out] += tree.predict_proba(X[out])", "            acc[bag] += tree.predict_proba(X[bag])",
      "a classification forest's OOB accuracy on the in-bag rows",
      "tests/learn/test_forest.py::test_oob_bookkeeping_matches_a_recount"),
    M("r2-formula", "learn", "treegen/core/metrics.py",
      "        r2 = 1.0 - ss_res / ss_tot", "        r2 = 1.0 - ss_res / ss_tot / len(y_true)",
      "R² divided by n once too often", "tests/core/test_metrics.py", "tests/learn/test_forest.py"),
    M("scaling-round-floor", "learn", "treegen/core/scaling.py",
      "        q = np.rint((X - self.offset) * self.scale * Q15_ONE)", "        q = np.floor((X - self.offset) * self.scale * Q15_ONE)",
      "the Q15 input scaling floors instead of rounding (Python model != the C scaling)",
      "tests/core/test_scaling.py", "tests/emit/test_portable_scaling.py"),
    # ------------------------------------------------------------------ CLI
    M("timeout-zero-accepted", "cli", "treegen/core/limits.py",
      "    if not 0 < seconds <= MAX_TIMEOUT:      # False for NaN", "    if not 0 <= seconds <= MAX_TIMEOUT:      # False for NaN",
      "a timeout of 0 s accepted (--timeout, --treegen-timeout)", T_LIMITS_TIMEOUT),
    M("timeout-limit-exclusive", "cli", "treegen/core/limits.py",
      "    if not 0 < seconds <= MAX_TIMEOUT:      # False for NaN", "    if not 0 < seconds < MAX_TIMEOUT:      # False for NaN",
      "the timeout limit itself refused (off by one at the bound)", T_LIMITS_TIMEOUT),
    M("int-range-exclusive", "cli", "treegen/cli/common.py",
      "        if not lo <= value <= hi:", "        if not lo <= value < hi:",
      "integer options refuse their documented largest value",
      "tests/reliability/test_limits.py::test_the_cli_bounds_are_the_limits_module"),
    M("cli-quantisation-line", "cli", "treegen/cli/export.py",
      "        moved = len(rep.unresolved_rows)", "        moved = 0",
      "export prints 'no data rows take another branch' whatever the export measured",
      "tests/emit/test_boost_q15_quantisation.py::test_cli_prints_the_count"),
]

EQUIVALENT = {"scaling-shr-far-no-sticky", "import-sum-double"}


def copy_checkout(dest: Path) -> Path:
    """The tracked files of the checkout (with its uncommitted edits) in ``dest/repo``, the shared
    datasets folder linked at ``dest/shared`` as tests/conftest.py expects."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    repo = dest / "repo"
    for f in files:
        if not f:
            continue
        src = REPO / f.decode()
        if src.is_file():
            out = repo / f.decode()
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out)
    shared = (REPO.parent / "shared").resolve()
    if shared.is_dir():
        os.symlink(shared, dest / "shared")
    return repo


def run_tests(repo: Path, tests: tuple, timeout: int = TEST_TIMEOUT) -> tuple[int, float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(repo)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        rc, out = -1, "timeout"
    tail = [ln for ln in out.splitlines() if ln.strip()][-1:] or [""]
    return rc, time.perf_counter() - t0, tail[0]


def check_entries(repo: Path, muts) -> list[str]:
    """Problems with the entries: a snippet that does not occur exactly once, a missing test file."""
    problems = []
    for m in muts:
        text = (repo / m.file).read_text(encoding="utf-8")
        if text.count(m.original) != 1:
            problems.append(f"{m.name}: the original snippet occurs {text.count(m.original)} times in {m.file}")
        for t in m.tests:
            if not (repo / t.split("::")[0]).is_file():
                problems.append(f"{m.name}: no test file {t}")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="run these mutations only")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated runs of each test selection")
    ap.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.relative_to(REPO)}")
    ap.add_argument("--merge", action="store_true",
                    help=f"with --only: replace those mutations' rows in {RESULTS.relative_to(REPO)} (a rerun after "
                         "tests were added) and recount")
    args = ap.parse_args(argv)
    muts = [m for m in MUTATIONS if not args.only or m.name in args.only]
    if args.list:
        for m in muts:
            print(f"{m.name:<28} {m.layer:<10} {m.file}  ->  {', '.join(m.tests)}")
        return 0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="treegen-mut-") as tmp:
        repo = copy_checkout(Path(tmp))
        problems = check_entries(repo, muts)
        if problems:
            for p in problems:
                print(f"stale: {p}", file=sys.stderr)
            return 2
        if not args.no_baseline:      # every mapped selection, unmutated, in one run (two workers)
            selection = tuple(sorted({t for m in muts for t in m.tests}))
            rc, secs, tail = run_tests(repo, ("-n", "2", *selection), timeout=3 * TEST_TIMEOUT)
            print(f"baseline  {'ok ' if rc == 0 else 'BAD'} {secs:6.1f} s  {len(selection)} selections  ({tail})",
                  flush=True)
            if rc != 0:
                print("the mapped tests fail unmutated: fix them first", file=sys.stderr)
                return 2
        rows = []
        for m in muts:
            path = repo / m.file
            original = path.read_text(encoding="utf-8")
            try:
                path.write_text(original.replace(m.original, m.mutated, 1), encoding="utf-8")
                rc, secs, tail = run_tests(repo, m.tests)
            finally:
                path.write_text(original, encoding="utf-8")      # never leave a mutation applied
            verdict = {0: "SURVIVED", 1: "caught"}.get(rc, f"error (pytest status {rc})")
            rows.append((m, verdict, secs, tail))
            print(f"{verdict:<9} {secs:6.1f} s  {m.name}  ({tail})", flush=True)
    if args.merge and args.only:
        merge_results(rows, commit)
        return 0
    caught = sum(1 for _, v, _, _ in rows if v == "caught")
    equivalent = [m.name for m, v, _, _ in rows if m.name in EQUIVALENT and v != "caught"]
    survivors = [m.name for m, v, _, _ in rows if v != "caught" and m.name not in EQUIVALENT]
    total = len(rows)
    summary = (f"caught {caught} of {total} mutations; {len(equivalent)} equivalent (shown not to be bugs): "
               f"{', '.join(equivalent) or 'none'}; other survivors: {', '.join(survivors) or 'none'}")
    print(summary)
    if not args.no_write and not args.only:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        lines = ["# Mutation check of the tests (bench/mutations.py)", "",
                 f"Command: `nice -n 10 python bench/mutations.py` at commit {commit} "
                 f"({time.strftime('%Y-%m-%d', time.gmtime())}).", "",
                 "Each row: one realistic bug applied to a temporary copy of the checkout, then only its mapped "
                 "tests run (`pytest -x`); caught = a test failed. Every mapped selection passed unmutated first.",
                 "", f"**{summary}**", "",
                 "| mutation | layer | file | verdict | s | tests | why |", "|---|---|---|---|---|---|---|"]
        for m, v, secs, _ in rows:
            why = m.why.replace("|", "\\|")
            lines.append(f"| {m.name} | {m.layer} | `{m.file}` | {v} | {secs:.0f} | "
                         f"{'<br>'.join(f'`{t}`' for t in m.tests)} | {why} |")
        RESULTS.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0 if not survivors else 1


def _row_line(m: Mutation, verdict: str, secs: float) -> str:
    why = m.why.replace("|", "\\|")
    return (f"| {m.name} | {m.layer} | `{m.file}` | {verdict} | {secs:.0f} | "
            f"{'<br>'.join(f'`{t}`' for t in m.tests)} | {why} |")


def summary_of(verdicts: dict) -> str:
    """The summary line of ``{name: verdict}``."""
    caught = sum(1 for v in verdicts.values() if v == "caught")
    equivalent = [n for n, v in verdicts.items() if n in EQUIVALENT and v != "caught"]
    survivors = [n for n, v in verdicts.items() if v != "caught" and n not in EQUIVALENT]
    return (f"caught {caught} of {len(verdicts)} mutations; {len(equivalent)} equivalent (shown not to be bugs): "
            f"{', '.join(equivalent) or 'none'}; other survivors: {', '.join(survivors) or 'none'}")


def merge_results(rows, commit: str) -> None:
    """Replace the rows of a rerun in the results file and recount (the first run's rows stay)."""
    lines = RESULTS.read_text(encoding="utf-8").splitlines()
    new = {m.name: (m, v, secs) for m, v, secs, _ in rows}
    verdicts, out = {}, []
    for ln in lines:
        cells = [c.strip() for c in ln.strip("|").split(" | ")] if ln.startswith("| ") else []
        if len(cells) >= 7 and cells[0] not in ("mutation", "---"):
            if cells[0] in new:
                m, v, secs = new[cells[0]]
                ln = _row_line(m, f"{v} (rerun at {commit})", secs)
                cells[3] = v
            verdicts[cells[0]] = cells[3].split(" (")[0]
        out.append(ln)
    summary = summary_of(verdicts)
    out = [f"**{summary}**" if ln.startswith("**caught ") else ln for ln in out]
    note = (f"Rerun at commit {commit} after tests were added for the first run's survivors: "
            f"`python bench/mutations.py --merge --only {' '.join(new)}`.")
    out = [ln for ln in out if not ln.startswith("Rerun at commit")]
    out.insert(out.index(f"**{summary}**"), note + "\n")
    RESULTS.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(summary)
    print(f"updated {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    sys.exit(main())
