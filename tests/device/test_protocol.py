"""Serial protocol v1, host side: CRC, frame codec, the byte-stream parser, and DeviceClient against an
in-process fake device (wrong SEQ/TYPE/CRC, ERROR frames, timeouts with the flush, lost links)."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest
import serial

from treegen.core.errors import TreegenError
from treegen.device.protocol import (LEN_LIMIT, OVERHEAD, BadCrc, BadLength, DeviceClient, DeviceError, DeviceInfo,
                                     DeviceTimeout, ErrorCode, Frame, FrameParser, LinkLost, MsgType, ProtocolError,
                                     crc16, decode_frame, encode_frame)


def _crc_bitwise(data: bytes) -> int:
    crc = 0xFFFF
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


# ---------------------------------------------------------------------- CRC and codec
@pytest.mark.parametrize("data, crc", [(b"123456789", 0x29B1), (b"", 0xFFFF), (b"A", 0xB915),
                                       (bytes(range(256)), 0x3FBD)])
def test_crc16_ccitt_false_vectors(data, crc):
    assert crc16(data) == crc == _crc_bitwise(data)


def test_crc16_chains_and_matches_bitwise_reference():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 100, 1000):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert crc16(data) == _crc_bitwise(data)
        assert crc16(data[n // 2:], crc16(data[:n // 2])) == crc16(data)


def test_encode_frame_golden_bytes():
    # A5 5A | LEN 5 | TYPE 1 | SEQ 7 | "hello" | CRC over 05 00 01 07 68 65 6c 6c 6f, little endian
    frame = encode_frame(MsgType.PING, 7, b"hello")
    assert frame == bytes.fromhex("a55a 0500 01 07 68656c6c6f fcdc")
    assert crc16(frame[2:-2]) == 0xDCFC
    assert encode_frame(MsgType.INFO, 0) == bytes.fromhex("a55a 0000 02 00") + struct.pack("<H", crc16(b"\0\0\2\0"))


@pytest.mark.parametrize("length", [0, 1, 2, 255, 256, 4096, LEN_LIMIT])
def test_codec_round_trip(length):
    rng = np.random.default_rng(length)
    payload = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
    frame = encode_frame(0x83, 200, payload)
    assert len(frame) == length + OVERHEAD
    assert decode_frame(frame) == Frame(0x83, 200, payload)


def test_encode_frame_rejects_out_of_range_fields():
    for args in [(256, 0, b""), (-1, 0, b""), (1, 256, b""), (1, 0, bytes(LEN_LIMIT + 1))]:
        with pytest.raises(TreegenError):
            encode_frame(*args)


def test_decode_frame_rejects_anything_but_one_valid_frame():
    frame = encode_frame(1, 1, b"abc")
    for bad in (frame[:-1], frame + b"\x00" + frame, frame[:-1] + bytes([frame[-1] ^ 1]), b""):
        with pytest.raises(ProtocolError) as exc:
            decode_frame(bad)
        assert "\n" not in str(exc.value)


# ---------------------------------------------------------------------- parser
def _feed_in_pieces(parser: FrameParser, data: bytes, rng) -> list:
    events, i = [], 0
    while i < len(data):
        n = int(rng.integers(1, 40))
        events += parser.feed(data[i:i + n])
        i += n
    return events


def test_parser_result_does_not_depend_on_how_the_stream_is_split():
    rng = np.random.default_rng(1)
    parts = []
    for k in range(200):
        kind = k % 5
        if kind == 0:
            parts.append(rng.integers(0, 256, int(rng.integers(0, 50)), dtype=np.uint8).tobytes())
        elif kind == 1:
            parts.append(encode_frame(int(rng.integers(0, 256)), k & 0xFF,
                                      rng.integers(0, 256, int(rng.integers(0, 100)), dtype=np.uint8).tobytes()))
        elif kind == 2:
            f = bytearray(encode_frame(3, k & 0xFF, b"xyz"))
            f[-1] ^= 0x10
            parts.append(bytes(f))
        elif kind == 3:
            parts.append(bytes([0xA5, 0x5A]) + struct.pack("<H", 100) + b"\x03\x09")  # oversize for max 64
        else:
            parts.append(bytes([0xA5] * int(rng.integers(1, 4))))
    stream = b"".join(parts)
    whole = FrameParser(64).feed(stream)
    bytewise = []
    p = FrameParser(64)
    for b in stream:
        bytewise += p.feed(bytes([b]))
    assert whole == bytewise == _feed_in_pieces(FrameParser(64), stream, rng)
    assert {type(e) for e in whole} == {Frame, BadCrc, BadLength}


def test_parser_skips_garbage_without_sync():
    rng = np.random.default_rng(2)
    garbage = bytes(b for b in rng.integers(0, 256, 500, dtype=np.uint8).tobytes() if b != 0xA5)
    frame = encode_frame(1, 42, b"ping")
    p = FrameParser()
    assert p.feed(garbage + frame) == [Frame(1, 42, b"ping")]
    assert p.skipped == len(garbage)
    assert p.hunting


def test_parser_sync0_runs_and_false_sync():
    p = FrameParser()
    assert p.feed(b"\xa5\xa5\xa5" + encode_frame(1, 1, b"a")) == [Frame(1, 1, b"a")]
    assert p.feed(b"\xa5\x00\x5a" + encode_frame(1, 2, b"b")) == [Frame(1, 2, b"b")]


def test_parser_truncated_frame_waits_then_completes():
    frame = encode_frame(4, 9, bytes(range(20)))
    p = FrameParser()
    for cut in range(len(frame)):
        p.reset()
        assert p.feed(frame[:cut]) == []
        # hunting: 1; LEN not complete: the header rest + CRC at least; then exactly the rest
        assert p.needed == (1 if cut < 2 else 8 - cut if cut < 4 else len(frame) - cut), cut
        assert p.feed(frame[cut:]) == [Frame(4, 9, bytes(range(20)))]


def test_parser_needed_with_unknown_and_oversize_length():
    p = FrameParser(64)
    p.feed(b"\xa5\x5a")
    assert p.needed == 4 + 2           # LEN, TYPE, SEQ, CRC at least
    p.feed(struct.pack("<H", 65))
    assert p.needed == 2               # oversize: the frame ends after SEQ
    p.feed(b"\x01")
    assert p.feed(b"\x02") == [BadLength(1, 2, 65)]
    assert p.hunting


def test_parser_bad_crc_then_immediate_resync():
    good = encode_frame(2, 5, b"")
    bad = bytearray(encode_frame(3, 6, b"payload"))
    bad[8] ^= 0x01                     # a payload bit
    events = FrameParser().feed(bytes(bad) + good)
    assert isinstance(events[0], BadCrc) and (events[0].type, events[0].seq, events[0].length) == (3, 6, 7)
    assert events[0].crc_received != events[0].crc_computed
    assert events[1] == Frame(2, 5, b"")


def test_parser_oversize_length_does_not_await_the_payload():
    header = bytes([0xA5, 0x5A]) + struct.pack("<H", 65) + b"\x03\x07"
    frame = encode_frame(1, 8, b"next")
    assert FrameParser(64).feed(header + frame) == [BadLength(3, 7, 65), Frame(1, 8, b"next")]
    # max_payload itself is fine
    assert FrameParser(64).feed(encode_frame(1, 1, bytes(64))) == [Frame(1, 1, bytes(64))]


def test_parser_flush_of_zeros_always_returns_to_hunting():
    rng = np.random.default_rng(3)
    for _ in range(300):
        p = FrameParser(64)
        p.feed(rng.integers(0, 256, int(rng.integers(0, 200)), dtype=np.uint8).tobytes()
               + encode_frame(1, 1, bytes(30))[: int(rng.integers(0, 38))])
        p.feed(bytes(64 + 8))
        assert p.hunting
        assert p.feed(encode_frame(1, 3, b"ok")) == [Frame(1, 3, b"ok")]


# ---------------------------------------------------------------------- DeviceInfo
def _info_payload(n_features=4, n_classes=3, max_payload=64, max_batch=7, strings=("native", "0.1.0", "q15-x")):
    out = struct.pack("<BHHHHBI32s", 1, n_features, n_classes, max_payload, max_batch, 2, 3, bytes(range(32)))
    for s in strings:
        out += bytes([len(s)]) + s.encode()
    return out


def test_device_info_parses_and_rejects_malformed_payloads():
    info = DeviceInfo.from_payload(_info_payload())
    assert (info.n_features, info.n_classes, info.max_payload, info.max_batch) == (4, 3, 64, 7)
    assert info.model_hash == bytes(range(32)).hex() and info.target == "native" and info.variant == "q15-x"
    assert info.class_bytes == 1 and info.counter_unit_name == "nanoseconds"
    good = _info_payload()
    for bad in (b"", b"\x02" + good[1:], good[:20], good[:-1], good + b"\x00"):
        with pytest.raises(ProtocolError) as exc:
            DeviceInfo.from_payload(bad)
        assert "\n" not in str(exc.value)


# ---------------------------------------------------------------------- DeviceClient with a fake device
class FakeDevice:
    """A pyserial-like port with a Python device behind it (answers via ``handler(frame) -> bytes``)."""

    def __init__(self, handler=None, n_features=4, n_classes=3, max_payload=64):
        self.parser = FrameParser(LEN_LIMIT)
        self.handler = handler or self.default_handler
        self.n_features, self.n_classes, self.max_payload = n_features, n_classes, max_payload
        self.max_batch = (max_payload - 2) // (2 * n_features)
        self.rx = bytearray()
        self.written = bytearray()
        self.requests = []
        self.timeout = None
        self.closed = False
        self.read_error = None
        self.write_error = None

    # pyserial-like
    def write(self, data):
        if self.write_error:
            raise self.write_error
        self.written += data
        for ev in self.parser.feed(data):
            if isinstance(ev, Frame):
                self.requests.append(ev)
                self.rx += self.handler(ev)
        return len(data)

    def read(self, n):
        if self.read_error:
            raise self.read_error
        if not self.rx:
            time.sleep(min(self.timeout or 0.01, 0.01))
            return b""
        out = bytes(self.rx[:n])
        del self.rx[:n]
        return out

    def close(self):
        self.closed = True

    def default_handler(self, f: Frame) -> bytes:
        if f.type == MsgType.PING:
            return encode_frame(0x81, f.seq, f.payload)
        if f.type == MsgType.INFO:
            return encode_frame(0x82, f.seq, _info_payload(self.n_features, self.n_classes, self.max_payload,
                                                           self.max_batch))
        if f.type == MsgType.PREDICT:
            n = struct.unpack_from("<H", f.payload)[0]
            rows = np.frombuffer(f.payload, dtype="<i2", offset=2).reshape(n, self.n_features)
            classes = (rows.sum(axis=1) % self.n_classes).astype(np.uint8)
            return encode_frame(0x83, f.seq, struct.pack("<H", n) + classes.tobytes())
        if f.type == MsgType.BENCH:
            n_iter = struct.unpack_from("<H", f.payload)[0]
            return encode_frame(0x84, f.seq, struct.pack("<IIBH", 10 * n_iter, n_iter, 2, 1))
        return encode_frame(0xFF, f.seq, bytes([ErrorCode.UNKNOWN_TYPE, f.type]))


def _client(dev, timeout=0.5) -> DeviceClient:
    return DeviceClient(dev, timeout=timeout, name="fake")


def test_client_requests_against_a_fake_device():
    dev = FakeDevice()
    c = _client(dev)
    assert c.ping(b"\xa5\x5a hello") == b"\xa5\x5a hello"
    assert c.info().n_features == 4
    rows = np.arange(4 * 40).reshape(40, 4) % 32768
    assert np.array_equal(c.predict(rows), rows.sum(axis=1) % 3)
    n_predict = sum(1 for r in dev.requests if r.type == MsgType.PREDICT)
    assert n_predict == -(-40 // dev.max_batch)      # split into batches of max_batch rows
    assert c.bench(rows[0], 100) == (1000, 100, 2, 1)
    seqs = [r.seq for r in dev.requests]
    assert len(set(seqs)) == len(seqs)               # a new SEQ for every request
    c.close()
    assert dev.closed


def test_client_validates_rows_before_sending():
    c = _client(FakeDevice())
    for rows in (np.zeros((2, 5)), np.full((1, 4), 32768), np.full((1, 4), -1), np.full((1, 4), 0.5)):
        with pytest.raises(TreegenError):
            c.predict(rows)
    for n_iter in (0, 65536):
        with pytest.raises(TreegenError):
            c.bench(np.zeros(4), n_iter)


@pytest.mark.parametrize("mutate, match", [
    (lambda f: encode_frame(0x81, (f.seq + 1) & 0xFF, f.payload), "wrong SEQ"),
    (lambda f: encode_frame(0x82, f.seq, f.payload), "unexpected TYPE 0x82"),
    (lambda f: encode_frame(0x81, f.seq, f.payload)[:-1] + b"\x00", "bad CRC"),
    (lambda f: encode_frame(0x81, f.seq, f.payload + b"!"), "PONG payload differs"),
])
def test_client_reports_protocol_errors_in_one_line(mutate, match):
    c = _client(FakeDevice(handler=mutate))
    with pytest.raises(ProtocolError, match=match) as exc:
        c.ping(b"abc")
    assert "\n" not in str(exc.value)


def test_client_reports_error_frames_with_the_code_name():
    c = _client(FakeDevice(handler=lambda f: encode_frame(0xFF, f.seq, bytes([ErrorCode.BAD_PAYLOAD, f.type]))))
    with pytest.raises(DeviceError, match="BAD_PAYLOAD") as exc:
        c.ping(b"x")
    assert exc.value.code == ErrorCode.BAD_PAYLOAD and exc.value.request_type == MsgType.PING
    assert exc.value.code_name == "BAD_PAYLOAD"
    assert isinstance(exc.value, ProtocolError)


def test_client_timeout_flushes_with_zeros_and_reports_the_bytes_received():
    partial = encode_frame(0x81, 1, b"abcdef")[:5]
    dev = FakeDevice(handler=lambda f: partial)
    c = _client(dev, timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(DeviceTimeout) as exc:
        c.ping(b"abcdef")
    assert time.monotonic() - t0 < 3
    msg = str(exc.value)
    assert "\n" not in msg and "PING" in msg and "a5 5a 06 00 81" in msg and "0x81" in msg
    assert exc.value.received == partial
    # max_payload unknown (no INFO yet): a flush of 65535 + 8 zero bytes
    assert dev.written.endswith(bytes(LEN_LIMIT + OVERHEAD))


def test_client_timeout_flush_uses_the_device_max_payload_once_known():
    dev = FakeDevice()
    c = _client(dev, timeout=0.2)
    c.info()
    dev.handler = lambda f: b""
    with pytest.raises(DeviceTimeout, match="received nothing"):
        c.ping(b"")
    tail = bytes(dev.written[-(64 + OVERHEAD + 1):])
    assert tail[1:] == bytes(64 + OVERHEAD) and tail[0] != 0


def test_client_timeout_flush_uses_the_max_payload_hint_before_info():
    dev = FakeDevice(handler=lambda f: b"")
    c = DeviceClient(dev, timeout=0.2, max_payload=100)
    with pytest.raises(DeviceTimeout):
        c.ping(b"")
    assert len(dev.written) == len(encode_frame(1, 1, b"")) + 100 + OVERHEAD


def test_client_garbage_before_the_response_is_skipped():
    c = _client(FakeDevice(handler=lambda f: b"\x00\x13\xa5" + encode_frame(0x81, f.seq, f.payload)))
    assert c.ping(b"ok") == b"ok"


def test_client_stale_response_is_a_protocol_error_not_a_success():
    dev = FakeDevice()
    c = _client(dev)
    dev.rx += encode_frame(0x81, 99, b"old")          # left over from an earlier request
    with pytest.raises(ProtocolError, match="wrong SEQ 99"):
        c.ping(b"new")


def test_client_drops_the_late_answer_to_a_request_it_timed_out_on():
    """A loaded host: the answer to PING seq k arrives after its timeout (and the flush), just before the
    answer to PING seq k+1 (tune failed with 'response to PING (seq 3): wrong SEQ 2'). The client said
    seq k timed out, so that frame is dropped; an answer with a SEQ it never gave up on stays an error."""
    dev = FakeDevice(handler=lambda f: b"")
    c = _client(dev, timeout=0.2)
    with pytest.raises(DeviceTimeout):
        c.ping(b"late")
    late_seq = dev.requests[-1].seq
    dev.handler = lambda f: encode_frame(0x81, late_seq, b"late") + encode_frame(0x81, f.seq, f.payload)
    assert c.ping(b"now") == b"now"
    dev.handler = lambda f: encode_frame(0x81, late_seq, b"late") + encode_frame(0x81, f.seq, f.payload)
    with pytest.raises(ProtocolError, match=f"wrong SEQ {late_seq}"):   # dropped once, not forever
        c.ping(b"again")


def test_client_drops_the_late_answer_to_a_request_that_timed_out():
    """A device slower than the timeout (a QEMU board on a loaded machine) answers a PING after the
    client gave up and flushed: the next request drops that late answer (its SEQ was abandoned) and
    takes its own; an answer to a SEQ never abandoned is still an error."""
    dev = FakeDevice()
    late = []

    def slow(f):                                       # the first PING is answered only with the next one
        if f.payload == b"first":
            late.append(encode_frame(0x81, f.seq, f.payload))
            return b""
        return late.pop() + encode_frame(0x81, f.seq, f.payload)

    dev.handler = slow
    c = _client(dev, timeout=0.2)
    with pytest.raises(DeviceTimeout):
        c.ping(b"first")
    assert c.ping(b"second") == b"second"             # the late PONG of seq 1 came first: dropped
    dev.handler = lambda f: encode_frame(0x81, 1, b"first") + encode_frame(0x81, f.seq, f.payload)
    with pytest.raises(ProtocolError, match="wrong SEQ 1"):
        c.ping(b"third")                               # seq 1's late answer was dropped once already


def test_client_link_lost_on_read_and_write_errors():
    dev = FakeDevice(handler=lambda f: b"")
    dev.read_error = serial.SerialException("device reports readiness to read but returned no data")
    with pytest.raises(LinkLost, match="link lost while waiting") as exc:
        _client(dev).ping(b"x")
    assert "\n" not in str(exc.value)
    dev = FakeDevice()
    dev.write_error = OSError(5, "Input/output error")
    with pytest.raises(LinkLost, match="link lost while sending"):
        _client(dev).info()


def test_open_missing_port_is_one_line_error():
    with pytest.raises(TreegenError) as exc:
        DeviceClient.open("/dev/ttyTREEGEN-does-not-exist", timeout=0.5)
    msg = str(exc.value)
    assert "\n" not in msg and "cannot open serial port /dev/ttyTREEGEN-does-not-exist" in msg
    with pytest.raises(TreegenError):
        DeviceClient.open("socket://127.0.0.1:1", timeout=0.5)   # nothing listens on port 1
