"""The host side of the serial protocol v1 (``docs/protocol.md``): frame codec, CRC, parser, client.

Frame::

    A5 5A | LEN u16 | TYPE u8 | SEQ u8 | PAYLOAD (LEN bytes) | CRC u16      (little endian)

CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no xorout) over LEN, TYPE, SEQ and
PAYLOAD; ``crc16(b"123456789") == 0x29B1``.

:class:`FrameParser` is the same byte-at-a-time state machine as the firmware's
``tg_parser_feed()`` (``templates/firmware/tg_protocol.c``), event for event: the fuzz tests run
both on the same byte streams. :class:`DeviceClient` talks to a device over any pyserial-like
object (``read(n)``, ``write(b)``, ``timeout``, ``close()``): a real ``/dev/tty*``, a QEMU UART at
``socket://host:port`` or the pseudo-terminal of the native harness.

Errors are :class:`~treegen.core.errors.TreegenError` subclasses with one-line messages:
:class:`DeviceTimeout` (no complete response in time; carries the bytes received so far),
:class:`ProtocolError` (bad CRC / SEQ / TYPE / payload in a response; :class:`DeviceError` for an
ERROR frame from the device, with its code name) and :class:`LinkLost` (the port vanished).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from treegen.core.errors import TreegenError

PROTOCOL_VERSION = 1
SYNC0 = 0xA5
SYNC1 = 0x5A
HEADER_SIZE = 6          # SYNC0 SYNC1 LEN LEN TYPE SEQ
OVERHEAD = 8             # header + CRC
LEN_LIMIT = 0xFFFF       # LEN is a u16
RESPONSE = 0x80          # response TYPE = request TYPE | RESPONSE (or ERROR)

DEFAULT_BAUDRATE = 115200
DEFAULT_TIMEOUT = 5.0    # seconds per request
POLL_INTERVAL = 0.05     # the port's read timeout: reads return at least this often
DRAIN_QUIET = 0.1        # after a timeout: discard input until it is quiet this long ...
DRAIN_MAX = 1.0          # ... or at most this long


class MsgType(IntEnum):
    PING = 0x01
    INFO = 0x02
    PREDICT = 0x03
    BENCH = 0x04
    TRAIN_DATA = 0x05          # on-device training (capability bit 2, TRAIN): treegen.device.train_hil
    TRAIN = 0x06
    TREE_GET = 0x07
    PREDICT_TRAINED = 0x08
    TRAIN_INFO = 0x09
    PROBA = 0x0A               # soft-voting ensembles (capability bit 3, PROBA): classes + probabilities
    TRAIN_PROFILE = 0x0B       # per-phase counter totals of the last TRAIN (profiling builds)
    PREDICT_RAW = 0x0C         # raw float32 rows -> the float entry point (capability bit 4, RAW)
    PREDICT_F32 = 0x0D         # raw float32 rows -> the float32 export's class and output bits (bit 5, F32)
    PONG = 0x81
    INFO_RESPONSE = 0x82
    PREDICT_RESPONSE = 0x83
    BENCH_RESPONSE = 0x84
    TRAIN_DATA_RESPONSE = 0x85
    TRAIN_RESPONSE = 0x86
    TREE_GET_RESPONSE = 0x87
    PREDICT_TRAINED_RESPONSE = 0x88
    TRAIN_INFO_RESPONSE = 0x89
    PROBA_RESPONSE = 0x8A
    TRAIN_PROFILE_RESPONSE = 0x8B
    PREDICT_RAW_RESPONSE = 0x8C
    PREDICT_F32_RESPONSE = 0x8D
    ERROR = 0xFF


class ErrorCode(IntEnum):
    BAD_CRC = 1
    UNKNOWN_TYPE = 2
    BAD_LENGTH = 3
    BAD_PAYLOAD = 4
    NO_DATA = 5          # TRAIN before any TRAIN_DATA (or from flash when none is compiled in)
    TOO_LARGE = 6        # more rows / attributes / classes than the device's engine was generated for
    NOT_TRAINED = 7      # TREE_GET / PREDICT_TRAINED before a successful TRAIN


class CounterUnit(IntEnum):
    INSTRUCTIONS = 0     # SysTick under QEMU -icount shift=0
    CYCLES = 1           # DWT CYCCNT
    NANOSECONDS = 2      # host clock


#: timed-out requests whose late answers a client recognises (and drops)
MAX_ABANDONED = 8

CAP_PREDICT = 0x1
CAP_BENCH = 0x2
CAP_TRAIN = 0x4
CAP_PROBA = 0x8
CAP_RAW = 0x10
CAP_F32 = 0x20


# ---------------------------------------------------------------------- errors
class ProtocolError(TreegenError):
    """A response that breaks the protocol (bad CRC, wrong SEQ or TYPE, malformed payload)."""


class DeviceError(ProtocolError):
    """The device answered with an ERROR frame."""

    def __init__(self, message: str, code: int, request_type: int):
        super().__init__(message)
        self.code = code
        self.request_type = request_type

    @property
    def code_name(self) -> str:
        return _name(ErrorCode, self.code)


class DeviceTimeout(TreegenError):
    """No complete response within the timeout. ``received``: the bytes that did arrive."""

    def __init__(self, message: str, received: bytes = b"", expected: str = ""):
        super().__init__(message)
        self.received = bytes(received)
        self.expected = expected


class LinkLost(TreegenError):
    """The port went away (device closed, unplugged or killed; EOF or an OS error)."""


def _name(enum, value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"0x{value:02X}"


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _hex(data: bytes, limit: int = 32) -> str:
    shown = bytes(data[:limit]).hex(" ")
    return shown + (f" ... (+{len(data) - limit} bytes)" if len(data) > limit else "")


# ---------------------------------------------------------------------- CRC and frames
def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _crc_table()


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE of ``data`` (continuing from ``crc``)."""
    table = _CRC_TABLE
    for byte in bytes(data):
        crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ byte) & 0xFF]
    return crc


def encode_frame(type_: int, seq: int, payload: bytes = b"") -> bytes:
    """The bytes of one frame."""
    payload = bytes(payload)
    if not 0 <= type_ <= 0xFF or not 0 <= seq <= 0xFF:
        raise TreegenError(f"frame TYPE {type_} / SEQ {seq} out of range 0..255")
    if len(payload) > LEN_LIMIT:
        raise TreegenError(f"frame payload of {len(payload)} bytes is longer than {LEN_LIMIT}")
    body = struct.pack("<HBB", len(payload), type_, seq) + payload
    return bytes((SYNC0, SYNC1)) + body + struct.pack("<H", crc16(body))


@dataclass(frozen=True)
class Frame:
    """A complete frame with a valid CRC."""
    type: int
    seq: int
    payload: bytes


@dataclass(frozen=True)
class BadCrc:
    """A complete frame whose CRC does not match."""
    type: int
    seq: int
    length: int
    crc_received: int
    crc_computed: int


@dataclass(frozen=True)
class BadLength:
    """A header announcing LEN > max_payload (the payload is not awaited)."""
    type: int
    seq: int
    length: int


def decode_frame(data: bytes, max_payload: int = LEN_LIMIT) -> Frame:
    """Decode exactly one frame (no leading or trailing bytes); raises :class:`ProtocolError`."""
    events = FrameParser(max_payload).feed(data)
    if len(events) != 1 or not isinstance(events[0], Frame):
        what = ", ".join(type(e).__name__ for e in events) or "no complete frame"
        raise ProtocolError(f"not one valid frame ({what}) in {len(data)} bytes: {_hex(data)}")
    return events[0]


# ---------------------------------------------------------------------- parser
_HUNT, _SYNC1, _LEN0, _LEN1, _TYPE, _SEQ, _PAYLOAD, _CRC0, _CRC1 = range(9)


class FrameParser:
    """Byte-stream -> frames, exactly as the firmware parser (``tg_parser_feed``) does it.

    Hunts SYNC0 SYNC1 (``A5 A5 5A`` also starts a frame), then reads LEN, TYPE, SEQ; a LEN above
    ``max_payload`` gives :class:`BadLength` at once and hunting restarts with the next byte; else the
    payload and CRC are read and :class:`Frame` or :class:`BadCrc` is reported, and hunting restarts
    after the CRC. Bytes skipped while hunting are counted in ``skipped``.
    """

    def __init__(self, max_payload: int = LEN_LIMIT):
        if not 0 <= max_payload <= LEN_LIMIT:
            raise TreegenError(f"max_payload must be 0..{LEN_LIMIT}")
        self.max_payload = max_payload
        self.skipped = 0
        self.reset()

    def reset(self) -> None:
        self._state = _HUNT
        self._header = bytearray()
        self._payload = bytearray()
        self._len = 0
        self._crc_rx = bytearray()

    @property
    def hunting(self) -> bool:
        return self._state in (_HUNT, _SYNC1)

    @property
    def needed(self) -> int:
        """How many more bytes the current frame needs at least (1 while hunting)."""
        s = self._state
        if s in (_HUNT, _SYNC1):
            return 1
        if s <= _SEQ:
            header = _SEQ - s + 1
            if s <= _LEN1:
                return header + 2
            return header if self._len > self.max_payload else header + self._len + 2
        if s == _PAYLOAD:
            return self._len - len(self._payload) + 2
        return 2 - len(self._crc_rx)

    def feed(self, data: bytes) -> list:
        """Feed bytes; returns the events (:class:`Frame`, :class:`BadCrc`, :class:`BadLength`) completed."""
        data = bytes(data)
        events = []
        i, n = 0, len(data)
        while i < n:
            s = self._state
            if s == _HUNT:
                j = data.find(SYNC0, i)
                if j < 0:
                    self.skipped += n - i
                    return events
                self.skipped += j - i
                self._state = _SYNC1
                i = j + 1
            elif s == _SYNC1:
                b = data[i]
                i += 1
                if b == SYNC1:
                    self._state = _LEN0
                    self._header = bytearray()
                elif b != SYNC0:
                    self.skipped += 2
                    self._state = _HUNT
                else:
                    self.skipped += 1
            elif s <= _SEQ:
                self._header.append(data[i])
                i += 1
                if s == _LEN1:
                    self._len = self._header[0] | (self._header[1] << 8)
                if s < _SEQ:
                    self._state = s + 1
                    continue
                length, type_, seq = self._len, self._header[2], self._header[3]
                if length > self.max_payload:
                    events.append(BadLength(type_, seq, length))
                    self._state = _HUNT
                else:
                    self._payload = bytearray()
                    self._crc_rx = bytearray()
                    self._state = _PAYLOAD if length else _CRC0
            elif s == _PAYLOAD:
                take = min(self._len - len(self._payload), n - i)
                self._payload += data[i:i + take]
                i += take
                if len(self._payload) == self._len:
                    self._state = _CRC0
            else:  # _CRC0, _CRC1
                self._crc_rx.append(data[i])
                i += 1
                if s == _CRC0:
                    self._state = _CRC1
                    continue
                self._state = _HUNT
                rx = self._crc_rx[0] | (self._crc_rx[1] << 8)
                crc = crc16(bytes(self._payload), crc16(bytes(self._header)))
                type_, seq = self._header[2], self._header[3]
                if rx == crc:
                    events.append(Frame(type_, seq, bytes(self._payload)))
                else:
                    events.append(BadCrc(type_, seq, self._len, rx, crc))
        return events


# ---------------------------------------------------------------------- results
@dataclass(frozen=True)
class DeviceInfo:
    """The INFO response."""
    protocol_version: int
    n_features: int
    n_classes: int
    max_payload: int
    max_batch: int
    counter_unit: int
    capabilities: int
    model_hash: str              # sha256 hex (Model.hash())
    target: str
    treegen_version: str
    variant: str

    @property
    def class_bytes(self) -> int:
        """Bytes of one PREDICT answer: a class (u8, or u16 beyond 255 classes), or a regression
        model's int32 value (``n_classes`` 0)."""
        return 4 if self.n_classes == 0 else (1 if self.n_classes <= 255 else 2)

    @property
    def is_regression(self) -> bool:
        return self.n_classes == 0

    @property
    def counter_unit_name(self) -> str:
        return _name(CounterUnit, self.counter_unit).lower()

    @classmethod
    def from_payload(cls, payload: bytes) -> "DeviceInfo":
        p = bytes(payload)
        fixed = struct.Struct("<BHHHHBI32s")
        if len(p) < 1:
            raise ProtocolError("INFO response is empty")
        if p[0] != PROTOCOL_VERSION:
            raise ProtocolError(f"device speaks protocol version {p[0]}, this treegen speaks {PROTOCOL_VERSION}")
        if len(p) < fixed.size:
            raise ProtocolError(f"INFO response too short ({len(p)} bytes): {_hex(p)}")
        version, nf, nc, mp, mb, unit, caps, digest = fixed.unpack_from(p)
        pos = fixed.size
        strings = []
        for what in ("target name", "treegen version", "variant"):
            if pos >= len(p) or pos + 1 + p[pos] > len(p):
                raise ProtocolError(f"INFO response truncated in the {what} ({len(p)} bytes)")
            strings.append(p[pos + 1:pos + 1 + p[pos]].decode("ascii", "replace"))
            pos += 1 + p[pos]
        if pos != len(p):
            raise ProtocolError(f"INFO response has {len(p) - pos} unexpected trailing bytes")
        info = cls(version, nf, nc, mp, mb, unit, caps, digest.hex(), *strings)
        if nf < 1 or mb < 1:
            raise ProtocolError(f"INFO response with impossible values: {nf} features, {nc} classes, "
                                f"max_batch {mb}")
        return info


class BenchResult(NamedTuple):
    """BENCH response: ``total`` counter ticks for ``n_iter`` calls, in ``unit``; ``cls`` the class."""
    total: int
    n_iter: int
    unit: int
    cls: int

    @property
    def per_call(self) -> float:
        return self.total / self.n_iter

    @property
    def unit_name(self) -> str:
        return _name(CounterUnit, self.unit).lower()


# ---------------------------------------------------------------------- client
def open_port(url: str, *, baudrate: int = DEFAULT_BAUDRATE, timeout: float = DEFAULT_TIMEOUT):
    """A pyserial port for ``url`` (``/dev/ttyACM0``, ``socket://127.0.0.1:4321``, a pty path)."""
    try:
        import serial
    except ImportError:
        from treegen.device.extra import missing

        raise missing("pyserial", "talking to a device") from None

    # pyserial's RFC 2217 client (ser2net, a labgrid place's NetworkSerialPort) refuses write_timeout;
    # its writes go to a TCP socket, as socket:// ones do
    write_timeout = None if str(url).startswith("rfc2217://") else timeout
    try:
        return serial.serial_for_url(url, baudrate=baudrate, timeout=POLL_INTERVAL, write_timeout=write_timeout)
    except (serial.SerialException, OSError, ValueError) as exc:
        raise TreegenError(f"cannot open serial port {url}: {_one_line(exc)}") from None


def _serial_errors():
    try:
        import serial
    except ImportError:        # pyserial is in the device extra; open_port says so
        return OSError, ()
    return (serial.SerialException, OSError), (serial.SerialTimeoutException,)


class DeviceClient:
    """Requests to a device running the treegen firmware harness.

    ``port`` is a pyserial-like object; the client owns it (``close()`` closes it) and sets its read
    ``timeout`` to a short poll interval (the request timeout is enforced here). Use
    :meth:`open` for a URL. Every request has a ``timeout`` (seconds); on a timeout the client sends
    ``max_payload + 8`` zero bytes to flush a half-received frame on the device, discards what
    arrives for a short while and raises :class:`DeviceTimeout`.
    """

    def __init__(self, port, *, timeout: float = DEFAULT_TIMEOUT, name: str | None = None,
                 max_payload: int | None = None):
        self.port = port
        self.timeout = float(timeout)
        self.name = name or str(getattr(port, "port", None) or getattr(port, "name", None) or "device")
        self.max_payload_hint = max_payload     # flush size before INFO is known (default: 65535)
        #: a flush waits for this much silence (the target's ``[emulator] drain_quiet`` where an emulated
        #: UART takes input slowly)
        self.drain_quiet = DRAIN_QUIET
        self._seq = 0
        #: SEQs of the last requests given up on (timeout): their answers, if they arrive after the
        #: flush, are late, not wrong
        self._abandoned: list[int] = []
        self._info: DeviceInfo | None = None
        self._link_errors, self._write_timeouts = _serial_errors()
        try:
            port.timeout = POLL_INTERVAL
        except (AttributeError, *self._link_errors):
            pass

    @classmethod
    def open(cls, url: str, *, baudrate: int = DEFAULT_BAUDRATE, timeout: float = DEFAULT_TIMEOUT,
             max_payload: int | None = None) -> "DeviceClient":
        return cls(open_port(url, baudrate=baudrate, timeout=timeout), timeout=timeout, name=url,
                   max_payload=max_payload)

    def close(self) -> None:
        try:
            self.port.close()
        except (AttributeError, *self._link_errors):
            pass

    def __enter__(self) -> "DeviceClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ transport
    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0xFF
        return self._seq

    def _write(self, data: bytes, what: str) -> None:
        try:
            self.port.write(data)
        except self._write_timeouts:
            raise DeviceTimeout(f"{self.name}: could not send {what} within {self.timeout:g} s "
                                f"(the device is not reading)", b"", what) from None
        except self._link_errors as exc:
            raise LinkLost(f"{self.name}: link lost while sending {what}: {_one_line(exc)}") from None

    def _read(self, n: int, what: str) -> bytes:
        try:
            data = self.port.read(n)
        except self._link_errors as exc:
            raise LinkLost(f"{self.name}: link lost while waiting for {what}: {_one_line(exc)}") from None
        return bytes(data or b"")

    @property
    def _flush_len(self) -> int:
        if self._info is not None:
            limit = self._info.max_payload
        else:
            limit = LEN_LIMIT if self.max_payload_hint is None else int(self.max_payload_hint)
        return limit + OVERHEAD

    def flush_device(self) -> bytes:
        """Send ``max_payload + 8`` zero bytes (they complete any half-received frame on the device and
        can never start one), wait until they are sent, then discard input until it has been quiet for
        a short while; returns the discarded bytes."""
        self._write(bytes(self._flush_len), "the flush bytes")
        try:
            self.port.flush()                   # a real UART: returns when the zeros are on the wire
        except (AttributeError, *self._link_errors):
            pass
        discarded = bytearray()
        start = last = time.monotonic()
        while True:
            now = time.monotonic()
            if now - last >= self.drain_quiet or now - start >= max(DRAIN_MAX, 4 * self.drain_quiet):
                return bytes(discarded)
            chunk = self._read(4096, "the flush")
            if chunk:
                discarded += chunk
                last = time.monotonic()

    def request(self, type_: int, payload: bytes = b"", *, timeout: float | None = None) -> bytes:
        """Send one request, return the payload of its response (TYPE = request | 0x80)."""
        timeout = self.timeout if timeout is None else float(timeout)
        req_name = _name(MsgType, type_)
        expected_type = (type_ | RESPONSE) & 0xFF
        seq = self._next_seq()
        if seq in self._abandoned:              # the number comes round again (256 requests later)
            self._abandoned.remove(seq)
        frame = encode_frame(type_, seq, payload)
        what = f"{req_name} (seq {seq})"
        self._write(frame, what)
        deadline = time.monotonic() + timeout
        parser = FrameParser(self._info.max_payload if self._info is not None else LEN_LIMIT)
        received = bytearray()
        while True:
            if time.monotonic() >= deadline:
                self._abandoned = [*self._abandoned[-(MAX_ABANDONED - 1):], seq]
                self._on_timeout(what, timeout, received, f"a {_name(MsgType, expected_type)} (0x{expected_type:02X}) frame")
            chunk = self._read(parser.needed, f"the response to {what}")
            if not chunk:
                continue
            received += chunk
            for event in parser.feed(chunk):
                if not self._late(event):
                    return self._check(event, req_name, type_, seq, expected_type)

    def _late(self, event) -> bool:
        """Whether ``event`` is the answer to an earlier request that timed out (a device slower than
        the timeout, e.g. on a loaded machine, answers after the flush): dropped once, never taken for
        the answer to the current request. Any other SEQ stays a protocol error."""
        if not isinstance(event, Frame) or event.seq not in self._abandoned:
            return False
        self._abandoned.remove(event.seq)
        return True

    def _on_timeout(self, what: str, timeout: float, received: bytes, expected: str):
        got = f"received {len(received)} byte(s): {_hex(received)}" if received else "received nothing"
        self.flush_device()
        raise DeviceTimeout(f"{self.name}: no response to {what} within {timeout:g} s; expected {expected}, "
                            f"{got}", bytes(received), expected)

    def _check(self, event, req_name: str, type_: int, seq: int, expected_type: int) -> bytes:
        where = f"{self.name}: response to {req_name} (seq {seq})"
        if isinstance(event, BadLength):
            limit = self._info.max_payload if self._info is not None else LEN_LIMIT
            raise ProtocolError(f"{where}: LEN {event.length} exceeds the device's max_payload {limit}")
        if isinstance(event, BadCrc):
            raise ProtocolError(f"{where}: bad CRC (received 0x{event.crc_received:04X}, "
                                f"computed 0x{event.crc_computed:04X}, TYPE 0x{event.type:02X}, LEN {event.length})")
        if event.type == MsgType.ERROR:
            code = event.payload[0] if len(event.payload) >= 1 else 0
            req = event.payload[1] if len(event.payload) >= 2 else 0
            seq_note = "" if event.seq == seq else f" (with SEQ {event.seq}, expected {seq})"
            raise DeviceError(f"{where}: device reported ERROR {_name(ErrorCode, code)} for request TYPE "
                              f"0x{req:02X}{seq_note}", code, req)
        if event.seq != seq:
            raise ProtocolError(f"{where}: wrong SEQ {event.seq} (expected {seq}), TYPE 0x{event.type:02X}")
        if event.type != expected_type:
            raise ProtocolError(f"{where}: unexpected TYPE 0x{event.type:02X} (expected 0x{expected_type:02X})")
        return event.payload

    # ------------------------------------------------------------------ requests
    def ping(self, data: bytes = b"", *, timeout: float | None = None) -> bytes:
        """PING: the device echoes ``data``; returns the echo (checked equal)."""
        data = bytes(data)
        echo = self.request(MsgType.PING, data, timeout=timeout)
        if echo != data:
            raise ProtocolError(f"{self.name}: PONG payload differs from the PING payload "
                                f"({len(echo)} bytes vs {len(data)})")
        return echo

    def info(self, *, refresh: bool = False, timeout: float | None = None) -> DeviceInfo:
        """INFO (cached after the first call unless ``refresh``)."""
        if self._info is None or refresh:
            self._info = DeviceInfo.from_payload(self.request(MsgType.INFO, timeout=timeout))
        return self._info

    def _rows(self, rows, info: DeviceInfo) -> np.ndarray:
        a = np.asarray(rows)
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2 or a.shape[1] != info.n_features:
            raise TreegenError(f"rows have shape {np.shape(rows)}, the device's model expects "
                               f"(n, {info.n_features}) Q15 features")
        if a.size and not np.issubdtype(a.dtype, np.integer):
            if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
                raise TreegenError("rows must hold integer Q15 values")
        if a.size and (a.min() < 0 or a.max() > 32767):
            raise TreegenError("row values must be Q15 inputs 0..32767")
        return a.astype("<i2")

    def predict(self, rows, *, timeout: float | None = None) -> np.ndarray:
        """Class index for every row of Q15 features (split into batches of ``max_batch`` rows); a
        regression model (``n_classes`` 0): its int32 fixed-point value."""
        info = self.info()
        a = self._rows(rows, info)
        out = np.empty(a.shape[0], dtype=np.int64)
        dtype = np.dtype({1: "u1", 2: "<u2", 4: "<i4"}[info.class_bytes])
        for start in range(0, a.shape[0], info.max_batch):
            batch = a[start:start + info.max_batch]
            n = batch.shape[0]
            resp = self.request(MsgType.PREDICT, struct.pack("<H", n) + batch.tobytes(), timeout=timeout)
            if len(resp) != 2 + n * info.class_bytes or struct.unpack_from("<H", resp)[0] != n:
                raise ProtocolError(f"{self.name}: PREDICT response of {len(resp)} bytes does not hold "
                                    f"{n} classes")
            classes = np.frombuffer(resp, dtype=dtype, offset=2, count=n).astype(np.int64)
            if classes.size and not info.is_regression and classes.max() >= info.n_classes:
                raise ProtocolError(f"{self.name}: PREDICT returned class {int(classes.max())}, "
                                    f"the model has {info.n_classes}")
            out[start:start + n] = classes
        return out

    def predict_proba(self, rows, *, timeout: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """PROBA (devices with capability PROBA, i.e. soft-voting ensembles): for every row of Q15
        features its class index and the ``n_classes`` mean class probabilities as the device computes
        them (int64, units of 2^-15: 32768 = 1.0)."""
        info = self.info()
        if not info.capabilities & CAP_PROBA:
            raise TreegenError(f"{self.name}: the device does not serve PROBA (its model has no soft vote)")
        a = self._rows(rows, info)
        rec = np.dtype([("c", "u1" if info.class_bytes == 1 else "<u2"), ("p", "<u2", (info.n_classes,))])
        per_batch = max(1, min(info.max_batch, (info.max_payload - 2) // rec.itemsize))
        classes = np.empty(a.shape[0], dtype=np.int64)
        proba = np.empty((a.shape[0], info.n_classes), dtype=np.int64)
        for start in range(0, a.shape[0], per_batch):
            batch = a[start:start + per_batch]
            n = batch.shape[0]
            resp = self.request(MsgType.PROBA, struct.pack("<H", n) + batch.tobytes(), timeout=timeout)
            if len(resp) != 2 + n * rec.itemsize or struct.unpack_from("<H", resp)[0] != n:
                raise ProtocolError(f"{self.name}: PROBA response of {len(resp)} bytes does not hold {n} rows")
            data = np.frombuffer(resp, dtype=rec, offset=2, count=n)
            classes[start:start + n] = data["c"]
            proba[start:start + n] = data["p"]
        if classes.size and classes.max() >= info.n_classes:
            raise ProtocolError(f"{self.name}: PROBA returned class {int(classes.max())}, the model has "
                                f"{info.n_classes}")
        return classes, proba

    def predict_raw(self, rows, *, timeout: float | None = None) -> np.ndarray:
        """PREDICT_RAW (devices with capability RAW): the class of the model's float entry point
        (``tg_<name>_predict``, raw float32 features) for every row; rows are sent as float32 bit
        patterns, so NaN, +-inf and subnormals reach the device unchanged."""
        info = self.info()
        if not info.capabilities & CAP_RAW:
            raise TreegenError(f"{self.name}: the device does not serve PREDICT_RAW (an on-device training build)")
        a = np.ascontiguousarray(np.asarray(rows, dtype=np.float32).reshape(-1, info.n_features), dtype="<f4")
        per_batch = min(info.max_batch, (info.max_payload - 2) // (4 * info.n_features))
        out = np.empty(a.shape[0], dtype=np.int64)
        dtype = np.dtype("u1") if info.class_bytes == 1 else np.dtype("<u2")
        for start in range(0, a.shape[0], per_batch):
            batch = a[start:start + per_batch]
            n = batch.shape[0]
            resp = self.request(MsgType.PREDICT_RAW, struct.pack("<H", n) + batch.tobytes(), timeout=timeout)
            if len(resp) != 2 + n * info.class_bytes or struct.unpack_from("<H", resp)[0] != n:
                raise ProtocolError(f"{self.name}: PREDICT_RAW response of {len(resp)} bytes does not hold "
                                    f"{n} classes")
            classes = np.frombuffer(resp, dtype=dtype, offset=2, count=n).astype(np.int64)
            if classes.size and classes.max() >= info.n_classes:
                raise ProtocolError(f"{self.name}: PREDICT_RAW returned class {int(classes.max())}, "
                                    f"the model has {info.n_classes}")
            out[start:start + n] = classes
        return out

    def predict_f32(self, rows, row_bytes: int, *, timeout: float | None = None) -> np.ndarray:
        """PREDICT_F32 (devices with capability F32): for every float32 row the ``row_bytes`` bytes the
        harness's float32 export answers (the class, then its outputs' IEEE-754 bits: see
        :func:`treegen.device.firmware.f32_spec`), as a ``(n_rows, row_bytes)`` uint8 array."""
        info = self.info()
        if not info.capabilities & CAP_F32:
            raise TreegenError(f"{self.name}: the device does not serve PREDICT_F32 (no float32 export in its "
                               f"firmware)")
        a = np.ascontiguousarray(np.asarray(rows, dtype=np.float32).reshape(-1, info.n_features), dtype="<f4")
        per_batch = max(1, min(info.max_batch, (info.max_payload - 2) // max(4 * info.n_features, int(row_bytes))))
        out = np.empty((a.shape[0], int(row_bytes)), dtype=np.uint8)
        for start in range(0, a.shape[0], per_batch):
            batch = a[start:start + per_batch]
            n = batch.shape[0]
            resp = self.request(MsgType.PREDICT_F32, struct.pack("<H", n) + batch.tobytes(), timeout=timeout)
            if len(resp) != 2 + n * int(row_bytes) or struct.unpack_from("<H", resp)[0] != n:
                raise ProtocolError(f"{self.name}: PREDICT_F32 response of {len(resp)} bytes does not hold "
                                    f"{n} rows of {row_bytes} bytes")
            out[start:start + n] = np.frombuffer(resp, dtype=np.uint8, offset=2).reshape(n, int(row_bytes))
        return out

    def bench(self, row, n_iter: int, *, timeout: float | None = None) -> BenchResult:
        """BENCH: time ``n_iter`` (1..65535) calls of the model on one row."""
        info = self.info()
        if not 1 <= int(n_iter) <= 0xFFFF:
            raise TreegenError(f"n_iter must be 1..65535, got {n_iter}")
        a = self._rows(row, info)
        if a.shape[0] != 1:
            raise TreegenError(f"BENCH takes one row, got {a.shape[0]}")
        resp = self.request(MsgType.BENCH, struct.pack("<H", int(n_iter)) + a.tobytes(), timeout=timeout)
        if len(resp) != 11:
            raise ProtocolError(f"{self.name}: BENCH response has {len(resp)} bytes, expected 11")
        total, count, unit, cls = struct.unpack("<IIBH", resp)
        if count != int(n_iter):
            raise ProtocolError(f"{self.name}: BENCH ran {count} iterations, {n_iter} were asked for")
        return BenchResult(total, count, unit, cls)
