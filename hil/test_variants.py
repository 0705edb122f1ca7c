"""Multiply-accumulate variants on the emulated cores that execute them: scalar vs DSP (SMLAD) on the
Cortex-M4 (mps2-an386), scalar vs DSP vs MVE (Helium VMLADAVA) on the Cortex-M55 (mps3-an547). Every
firmware gives identical predictions on every row (equal to the fixed-point model) and sane
instruction counts (recorded per variant). EFTI (oblique) models only; needs the suite to build
(not with --hil-port)."""

from __future__ import annotations

import numpy as np
import pytest

from treegen.device.hil import bench_rows, check_identity, predict_rows
from treegen.device.protocol import CounterUnit

from treegen.hil.devices import open_client, start_device

pytestmark = [pytest.mark.hil, pytest.mark.hil_only(targets=("qemu-m4", "qemu-m55"), algos=("efti",), build=True)]


def test_mac_variants_agree(target, case, firmwares, hil_options, request, record_property):
    ref = case.ref
    results = {}
    variants = ("scalar", "dsp", "mve") if target.mve else ("scalar", "dsp")
    for variant in variants:
        fw = firmwares.get(target, case, variant=variant)
        assert fw.variant == variant
        with start_device(target, fw, None) as dev:
            request.node._hil_device = dev
            client = open_client(dev, hil_options.timeout)
            try:
                info = client.info()
                check_identity(info, case.model, target, f"q15-{case.layout}-{variant}")
                got = predict_rows(client, ref.X_q15)
                per_call = []
                for i in bench_rows(ref.X_q15.shape[0], 4):
                    r = client.bench(ref.X_q15[i], 1000)
                    assert r.unit == CounterUnit.INSTRUCTIONS and r.cls == ref.fixed[i]
                    per_call.append(r.per_call)
            finally:
                client.close()
        results[variant] = (got, float(np.mean(per_call)), fw.flash_bytes)
        record_property(f"{variant}_insn_per_inference", round(float(np.mean(per_call)), 2))
        record_property(f"{variant}_flash_bytes", fw.flash_bytes)
    scalar = results["scalar"][0]
    for variant in variants[1:]:
        got = results[variant][0]
        assert np.array_equal(scalar, got), \
            f"{int(np.count_nonzero(scalar != got))} rows differ between scalar and {variant}"
    assert np.array_equal(scalar, ref.fixed), f"{int(np.count_nonzero(scalar != ref.fixed))} rows differ from the model"
    for variant, (_, insn, _) in results.items():
        assert 10 < insn < 100_000, (variant, insn)
