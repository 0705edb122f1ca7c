"""Raw bytes to a device and its first answer, for the protocol-robustness tests of the native harness
and of the emulated silicon targets (tests/device/test_native_harness.py, test_silicon_targets.py)."""

from __future__ import annotations

import time

from treegen.device.protocol import ErrorCode, Frame, FrameParser, MsgType


def raw_response(client, data: bytes, timeout: float):
    """Write raw bytes, return the first event of the device's answer."""
    client.port.write(data)
    parser = FrameParser()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = parser.feed(client.port.read(parser.needed))
        if events:
            return events[0]
    raise AssertionError(f"no answer to {data[:16].hex()}")


def error_fields(ev: Frame) -> tuple:
    """(error code, request type, SEQ) of an ERROR frame."""
    assert isinstance(ev, Frame) and ev.type == MsgType.ERROR and len(ev.payload) == 2, ev
    return ErrorCode(ev.payload[0]), ev.payload[1], ev.seq
