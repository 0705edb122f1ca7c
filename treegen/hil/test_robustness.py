"""The device under bad input: garbage, a bad CRC, an unknown command, an oversized LEN, inconsistent
payloads and a truncated frame each give the documented ERROR frame (or are skipped), and the
device keeps answering; a device running another model is reported with one clear line.
Bundled with the plugin (``pytest --pyargs treegen.hil ...``); the checkout's ``hil/`` suite runs them
once per target (first model case)."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

from treegen.core.model import Model
from treegen.device.hil import HilError, run_hil
from treegen.device.protocol import (SYNC0, SYNC1, BadCrc, BadLength, DeviceError, ErrorCode, Frame, FrameParser,
                                     MsgType, encode_frame)


def read_frame(client, timeout: float):
    """Read until one complete frame arrives; fail with the bytes received so far on a timeout."""
    parser = FrameParser()
    received = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunk = client.port.read(parser.needed)
        if not chunk:
            continue
        received += chunk
        events = parser.feed(chunk)
        if events:
            event = events[0]
            assert isinstance(event, Frame), f"device sent {event} (bytes {bytes(received).hex(' ')})"
            return event
    pytest.fail(f"no frame from the device within {timeout} s; received {len(received)} byte(s): "
                f"{bytes(received).hex(' ') or 'nothing'}", pytrace=False)


def assert_error(frame: Frame, seq: int, code: ErrorCode, request_type: int) -> None:
    assert frame.type == MsgType.ERROR, f"expected an ERROR frame, got TYPE 0x{frame.type:02X}"
    assert frame.seq == seq
    assert frame.payload == bytes((code, request_type)), \
        f"ERROR payload {frame.payload.hex(' ')}, expected {code.name} for TYPE 0x{request_type:02X}"


def still_answers(client) -> None:
    payload = bytes(range(16))
    assert client.ping(payload) == payload
    assert client.info(refresh=True).protocol_version == 1


def test_garbage_is_skipped_and_the_next_frame_answered(treegen_device, treegen_options):
    dut, hil_options = treegen_device, treegen_options
    dut.port.write(bytes([0x00, 0xFF, SYNC1, 0x12, SYNC0, 0x00, 0x33]) * 20)   # no SYNC0 SYNC1 pair
    dut.port.write(encode_frame(MsgType.PING, 0x41, b"after garbage"))
    frame = read_frame(dut, hil_options.timeout)
    assert (frame.type, frame.seq, frame.payload) == (MsgType.PONG, 0x41, b"after garbage")
    # a SYNC0 repeated before SYNC1 still starts the frame (A5 A5 5A ...)
    dut.port.write(bytes([SYNC0]) + encode_frame(MsgType.PING, 0x42, b"x"))
    frame = read_frame(dut, hil_options.timeout)
    assert (frame.type, frame.seq, frame.payload) == (MsgType.PONG, 0x42, b"x")
    still_answers(dut)


def test_bad_crc_gives_error_bad_crc(treegen_device, treegen_options):
    dut, hil_options = treegen_device, treegen_options
    frame = bytearray(encode_frame(MsgType.PING, 0x37, b"crc"))
    frame[-1] ^= 0x5A
    dut.port.write(bytes(frame))
    assert_error(read_frame(dut, hil_options.timeout), 0x37, ErrorCode.BAD_CRC, MsgType.PING)
    still_answers(dut)


def test_unknown_command_gives_error_unknown_type(treegen_device):
    dut = treegen_device
    with pytest.raises(DeviceError) as exc:
        dut.request(0x7E, b"\x01\x02")
    assert (exc.value.code, exc.value.request_type) == (ErrorCode.UNKNOWN_TYPE, 0x7E)
    assert "UNKNOWN_TYPE" in str(exc.value)
    still_answers(dut)


def test_oversized_len_gives_error_bad_length_at_once(treegen_device, treegen_options):
    dut, hil_options = treegen_device, treegen_options
    info = dut.info()
    header = bytes((SYNC0, SYNC1)) + struct.pack("<HBB", info.max_payload + 1, MsgType.PING, 0x55)
    dut.port.write(header)                       # the payload is not awaited
    assert_error(read_frame(dut, hil_options.timeout), 0x55, ErrorCode.BAD_LENGTH, MsgType.PING)
    still_answers(dut)


def test_inconsistent_payloads_give_error_bad_payload(treegen_device, treegen_case):
    dut, case = treegen_device, treegen_case
    info = dut.info()
    row = case.ref.X_q15[0].astype("<i2")
    bad = [
        (MsgType.PREDICT, struct.pack("<H", info.max_batch + 1)),                       # too many rows
        (MsgType.PREDICT, struct.pack("<H", 2) + row.tobytes()),                        # 2 rows announced, 1 sent
        (MsgType.PREDICT, struct.pack("<H", 1) + np.full(info.n_features, -1, "<i2").tobytes()),  # negative
        (MsgType.BENCH, struct.pack("<H", 0) + row.tobytes()),                          # n_iter = 0
        (MsgType.BENCH, struct.pack("<H", 10) + row.tobytes()[:-2]),                    # short row
        (MsgType.INFO, b"\x00"),                                                        # INFO takes no payload
    ]
    for type_, payload in bad:
        with pytest.raises(DeviceError) as exc:
            dut.request(type_, payload)
        assert (exc.value.code, exc.value.request_type) == (ErrorCode.BAD_PAYLOAD, type_), str(exc.value)
    still_answers(dut)
    assert dut.predict(case.ref.X_q15[:1])[0] == case.ref.fixed[0]


def test_truncated_frame_is_flushed_and_the_device_recovers(treegen_device, treegen_case):
    dut, case = treegen_device, treegen_case
    dut.info()                                   # cached: the flush length is max_payload + 8
    frame = encode_frame(MsgType.PREDICT, 0x66, struct.pack("<H", 1) + case.ref.X_q15[0].astype("<i2").tobytes())
    dut.port.write(frame[:-3])                   # the device now waits for the rest of the frame
    discarded = dut.flush_device()               # zeros complete the frame (BAD_CRC answer), then hunt
    events = FrameParser().feed(discarded)
    assert any(isinstance(e, Frame) and e.type == MsgType.ERROR and e.payload[0] == ErrorCode.BAD_CRC
               for e in events), f"flush answered {discarded.hex(' ')}"
    assert not any(isinstance(e, (BadCrc, BadLength)) for e in events)
    still_answers(dut)
    assert dut.predict(case.ref.X_q15[:5]).tolist() == case.ref.fixed[:5].tolist()


def _other_model(model: Model) -> Model:
    """Same trees and shape, another input scaling: another model hash."""
    d = model.to_dict()
    d["scaling"]["offset"] = [v + 1.0 for v in d["scaling"]["offset"]]
    d["scaling"]["method"] = "minmax"
    return Model.from_dict(d)


def test_wrong_model_on_the_device_is_one_clear_error(treegen_running_device, treegen_target, treegen_case,
                                                      treegen_options):
    device, target, case, hil_options = treegen_running_device, treegen_target, treegen_case, treegen_options
    other = _other_model(case.model)
    assert other.hash() != case.model.hash()
    with pytest.raises(HilError) as exc:
        run_hil(other, target, port=device.url, data=(case.X_raw[:50], None) if case.X_raw.shape[0] else None,
                timeout=hil_options.timeout, bench_iters=10)
    message = str(exc.value)
    assert message == f"device runs model {case.model.hash()[:16]}, expected {other.hash()[:16]}"
    report = exc.value.report
    assert report["ok"] is False and report["error"] == message
    assert [c["ok"] for c in report["checks"]] == [False, False, False]
    assert report["mismatches"] is None          # nothing was compared
