"""Fuzzing the generated frame parser/builder (templates/firmware/tg_protocol.c) under ASan/UBSan.

The C driver ``tests/device/fuzz/fuzz_protocol.c`` feeds many random byte streams (random bytes, sync-heavy
bytes, valid, truncated, bit-flipped and oversize-LEN frames) with fixed seeds and fixed case counts, checks
every event against an independent CRC, and checks resynchronisation: a valid frame after a flush
(max_payload + 8 zeros), right after an oversize header or a bad-CRC frame, or after garbage without
SYNC0 is always recognised. A second mode prints the C parser's events for byte streams given on
stdin, compared event for event with ``treegen.device.protocol.FrameParser``.

These tests FAIL (never skip) when the host compiler or its sanitizers are missing.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from treegen.device.firmware import render_protocol
from treegen.device.protocol import BadCrc, BadLength, Frame, FrameParser, encode_frame

FUZZ_C = Path(__file__).resolve().parent / "fuzz" / "fuzz_protocol.c"
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1", "-fno-omit-frame-pointer"]
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-pedantic"]
RENDERED_MAX = 64                      # the template's TG_MAX_PAYLOAD; other sizes via -DTG_MAX_PAYLOAD=N


def _host_cc() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "no host C compiler (gcc/cc) on PATH: the protocol fuzz tests need one"
    return cc


@pytest.fixture(scope="module")
def protocol_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tg_protocol")
    render_protocol(out, max_payload=RENDERED_MAX)
    return out


@pytest.fixture(scope="module")
def fuzzers(protocol_dir, tmp_path_factory) -> dict:
    """max_payload -> fuzz driver executable (ASan + UBSan)."""
    cc = _host_cc()
    out = tmp_path_factory.mktemp("fuzz")
    exes = {}
    for max_payload in (RENDERED_MAX, 300, 1000):
        exe = out / f"fuzz_protocol_{max_payload}"
        define = [] if max_payload == RENDERED_MAX else [f"-DTG_MAX_PAYLOAD={max_payload}u"]
        cmd = [cc, "-std=c99", "-Wall", "-Wextra", "-Werror", *SANITIZE, *define, "-I", str(protocol_dir),
               "-o", str(exe), str(FUZZ_C), str(protocol_dir / "tg_protocol.c")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"fuzz driver build failed:\n{' '.join(cmd)}\n{proc.stderr}"
        info = subprocess.run([str(exe), "info"], capture_output=True, text=True, check=True).stdout
        assert info.strip() == f"max_payload {max_payload}"
        exes[max_payload] = exe
    return exes


def test_protocol_source_compiles_strictly_for_host_and_cortex_m(protocol_dir, tmp_path):
    cc = _host_cc()
    arm = shutil.which("arm-none-eabi-gcc")
    assert arm, "arm-none-eabi-gcc not found (scripts/setup.sh installs it)"
    src = str(protocol_dir / "tg_protocol.c")
    for compiler, flags in ((cc, ["-O2"]), (arm, ["-mcpu=cortex-m4", "-mthumb", "-Os"]),
                            (arm, ["-mcpu=cortex-m0plus", "-mthumb", "-Os"])):
        proc = subprocess.run([compiler, *STRICT, *flags, "-I", str(protocol_dir), "-c", src,
                               "-o", str(tmp_path / "p.o")], capture_output=True, text=True)
        assert proc.returncode == 0, f"{compiler} {flags}: {proc.stderr}"


# (max_payload, seed, iterations): ~2 s each here. Coverage is a case count, not a time box: every
# iteration runs on any machine (MAX_SECONDS 0 = no limit in the driver)
RUNS = [(64, 1, 70_000), (64, 2, 70_000), (64, 3, 70_000), (300, 4, 20_000), (300, 5, 20_000), (1000, 6, 8_000)]
MAX_SECONDS = 0


@pytest.mark.parametrize("max_payload, seed, iterations", RUNS)
def test_fuzz_random_streams_no_crash_and_resync(fuzzers, max_payload, seed, iterations):
    proc = subprocess.run([str(fuzzers[max_payload]), "run", str(seed), str(iterations), str(MAX_SECONDS)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"fuzz run failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    m = re.match(r"iterations (\d+) bytes (\d+) frames (\d+) bad_crc (\d+) bad_length (\d+) probes (\d+)",
                 proc.stdout)
    assert m, proc.stdout
    done, n_bytes, frames, bad_crc, bad_len, probes = map(int, m.groups())
    assert done == iterations, f"only {done} of {iterations} iterations ran"
    assert probes == 5 * done                     # every resync probe was recognised
    assert frames >= probes and bad_crc > done and bad_len > done
    assert n_bytes > 4 * max_payload * done


def _random_streams(seed: int, count: int, max_payload: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    streams = []
    for _ in range(count):
        parts = []
        for _ in range(int(rng.integers(1, 15))):
            kind = int(rng.integers(0, 7))
            if kind == 0:
                parts.append(rng.integers(0, 256, int(rng.integers(0, 2 * max_payload)), dtype=np.uint8).tobytes())
            elif kind == 1:
                parts.append(bytes(rng.choice([0xA5, 0x5A, 0x00, 0xFF, 0x01, 0x40], int(rng.integers(0, 40)))))
            elif kind in (2, 3, 4):
                n = int(rng.choice([0, max_payload, int(rng.integers(0, max_payload + 1))]))
                f = bytearray(encode_frame(int(rng.integers(0, 256)), int(rng.integers(0, 256)),
                                           rng.integers(0, 256, n, dtype=np.uint8).tobytes()))
                if kind == 3:
                    f = f[: int(rng.integers(0, len(f)))]
                elif kind == 4:
                    f[int(rng.integers(2, len(f)))] ^= 1 << int(rng.integers(0, 8))
                parts.append(bytes(f))
            elif kind == 5:
                length = int(rng.integers(max_payload + 1, 65536))
                parts.append(bytes([0xA5, 0x5A]) + struct.pack("<H", length) + bytes(rng.integers(0, 256, 2 + int(
                    rng.integers(0, 20)), dtype=np.uint8)))
            else:
                parts.append(bytes([0xA5]) * int(rng.integers(1, 5)))
        streams.append(b"".join(parts))
    return streams


def _python_events(stream: bytes, max_payload: int) -> list[str]:
    out = []
    for ev in FrameParser(max_payload).feed(stream):
        if isinstance(ev, Frame):
            out.append(f"F {ev.type} {ev.seq} {len(ev.payload)} {ev.payload.hex()}")
        elif isinstance(ev, BadCrc):
            out.append(f"C {ev.type} {ev.seq} {ev.length}")
        else:
            assert isinstance(ev, BadLength)
            out.append(f"L {ev.type} {ev.seq} {ev.length}")
    return out


@pytest.mark.parametrize("max_payload", [64, 300])
def test_c_parser_and_python_parser_agree_event_for_event(fuzzers, max_payload):
    streams = _random_streams(100 + max_payload, 400, max_payload)
    data = b"".join(struct.pack("<I", len(s)) + s for s in streams)
    proc = subprocess.run([str(fuzzers[max_payload]), "events"], input=data, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-4000:]
    records = proc.stdout.decode().split("E\n")
    assert records[-1] == "" and len(records) == len(streams) + 1
    kinds = set()
    for i, (stream, record) in enumerate(zip(streams, records)):
        c_events = record.splitlines()
        py_events = _python_events(stream, max_payload)
        assert c_events == py_events, f"stream {i} ({len(stream)} bytes): C {c_events[:5]} vs Python {py_events[:5]}"
        kinds.update(e[0] for e in c_events)
    assert kinds == {"F", "C", "L"}
