"""The model on the device: INFO identifies it, PREDICT equals the Python fixed-point model on every
row, BENCH is sane. Run with ``pytest --pyargs treegen.hil --treegen-target T --treegen-model M
[--treegen-data D]``; the checkout's ``hil/`` suite runs the same checks over its targets and models."""

from __future__ import annotations

import time

import numpy as np

from treegen.core.version import __version__
from treegen.device.hil import (bench_rows, check_identity, counter_unit_name, image_target, mismatch_rows,
                                predict_rows)
from treegen.device.protocol import CAP_BENCH, CAP_PREDICT, CounterUnit
from treegen.emit.quantize import quantize_model
from treegen.hil.devices import expected_counter_unit

SYSTICK_TICK = 40          # instructions per SysTick tick on the mps2 boards (resolution of BENCH)


def systick_tick(target) -> float:
    """Instructions per SysTick tick under -icount shift=0 (1 ns each): 40 on the mps2 boards (25 MHz),
    50 on AN505 (20 MHz), 31.25 on AN547 (32 MHz); the resolution of BENCH."""
    return 1e9 / target.clock_hz if target.kind == "emulated" and target.clock_hz > 0 else SYSTICK_TICK


def test_info_identifies_the_model(treegen_device, treegen_target, treegen_case, treegen_firmware, treegen_record):
    dut, target, case, firmware = treegen_device, treegen_target, treegen_case, treegen_firmware
    info = dut.info()
    treegen_record("device_variant", info.variant)
    treegen_record("model_hash", info.model_hash)
    # hash, feature/class counts and target name; the variant too when the suite built the firmware
    check_identity(info, case.model, image_target(target), firmware.variant_string if firmware is not None else None)
    assert info.protocol_version == 1
    assert info.capabilities & (CAP_PREDICT | CAP_BENCH) == CAP_PREDICT | CAP_BENCH
    assert info.counter_unit == expected_counter_unit(target), \
        f"counter unit {counter_unit_name(info.counter_unit)}, expected " \
        f"{counter_unit_name(expected_counter_unit(target))}"
    assert 1 <= info.max_batch and 2 + 2 * info.n_features * info.max_batch <= info.max_payload
    if firmware is not None:
        assert info.treegen_version == __version__


def test_predict_equals_fixed_point_model_on_every_row(treegen_device, treegen_case, treegen_record):
    dut, case = treegen_device, treegen_case
    ref = case.ref
    t0 = time.perf_counter()
    got = predict_rows(dut, ref.X_q15)
    seconds = time.perf_counter() - t0
    n = ref.X_q15.shape[0]
    treegen_record("rows", n)
    treegen_record("rows_per_s", round(n / seconds, 1))
    if ref.is_regression:      # int32 fixed-point values: equal to the Python model's, bit for bit
        diff = np.ldexp(got.astype(np.float64), -ref.frac_bits) - ref.float_values
        treegen_record("float_max_abs_difference", float(np.max(np.abs(diff))) if n else 0.0)
        bad = mismatch_rows(ref, got, case.model)
        assert not bad, f"{int(np.count_nonzero(got != ref.fixed))} of {n} device values differ from the " \
                        f"fixed-point model; first: {bad[:3]}"
        return
    agreement = 100.0 * float(np.mean(got == ref.floating))
    treegen_record("float_agreement_pct", round(agreement, 4))
    if ref.labels is not None:
        treegen_record("accuracy_pct", round(100.0 * float(np.mean(got == ref.labels)), 4))
    bad = mismatch_rows(ref, got, case.model)
    assert not bad, f"{int(np.count_nonzero(got != ref.fixed))} of {n} device predictions differ from the " \
                    f"fixed-point model; first: {bad[:3]}"
    # a model whose every integer test provably equals its float test (EFTI trees, axis trees) decides
    # on the device exactly as the float model: the agreement is asserted, not only recorded
    if case.model.vote == "hard" and all(qt.exact for qt in quantize_model(case.model)):
        assert agreement == 100.0, f"float agreement {agreement:.4f} % for a model quantised exactly"


def test_bench_is_sane(treegen_device, treegen_target, treegen_case, treegen_record):
    dut, target, case = treegen_device, treegen_target, treegen_case
    info = dut.info()
    ref = case.ref
    rows = bench_rows(ref.X_q15.shape[0], 4)
    n_iter = 1000
    per_call = []
    for i in rows:
        r = dut.bench(ref.X_q15[i], n_iter)
        assert r.unit == info.counter_unit, f"BENCH unit {r.unit_name}, INFO said {info.counter_unit_name}"
        assert r.n_iter == n_iter
        want = int(ref.fixed[i]) & 0xFFFF if ref.is_regression else ref.fixed[i]   # a value: its low 16 bits
        assert r.cls == want, f"row {i}: BENCH class {r.cls}, fixed-point model {want}"
        assert 0 < r.total < 0xFFFFFFFF, r
        per_call.append(r.per_call)
    mean = float(np.mean(per_call))
    treegen_record("per_inference", round(mean, 2))
    treegen_record("counter_unit", counter_unit_name(info.counter_unit))
    if info.counter_unit in (CounterUnit.INSTRUCTIONS, CounterUnit.CYCLES):
        # a call, the tree walk and a return: more than a handful, far less than 100k instructions
        assert 10 < min(per_call) and max(per_call) < 100_000, per_call
    else:
        assert max(per_call) < 1_000_000, per_call      # < 1 ms per inference on the host
    if info.counter_unit == CounterUnit.INSTRUCTIONS:
        # deterministic under -icount, and linear in n_iter (to the SysTick resolution per chunk)
        row = ref.X_q15[rows[0]]
        a, b = dut.bench(row, n_iter), dut.bench(row, n_iter)
        # the slack: 16 / 32 ticks, never below that of a 40-instruction tick (the mps2 boards): BENCH
        # times in doubling chunks, each with two counter reads (~30 instructions), so 2n calls take
        # one chunk instead of twice n's chunks (measured: -232 instructions for n 1000 vs 2000 on
        # netduinoplus2, whose SysTick ticks every 5.95 instructions)
        tick = max(systick_tick(target), SYSTICK_TICK)
        assert abs(a.total - b.total) <= tick * 16, (a, b)
        c = dut.bench(row, 2 * n_iter)
        assert abs(c.total - 2 * a.total) <= tick * 32, (a, c)
