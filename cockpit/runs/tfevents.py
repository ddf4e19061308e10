"""TensorBoard event files (`output_dir/runs/events.out.tfevents.*`), read without TensorBoard.

The file is a TFRecord stream: each record is `u64 length, u32 masked crc32c(length), data,
u32 masked crc32c(data)`, the data an `Event` protobuf (`wall_time` = 1 double, `step` = 2 varint,
`summary` = 5) whose `Summary.value` (1, repeated) holds `tag` (1) and `simple_value` (2, float), or
a `tensor` (8) for writers that use the new style.  Only what a training monitor needs is decoded;
every other field is skipped by its wire type.

Why not a library: TensorBoard's own reader pulls in TensorBoard (and grpc, protobuf, numpy) on the
jump box for ~100 lines of framing; tbparse needs TensorBoard too.

Reading is by offset (tail over SFTP): a record cut at the end of the file is left for the next
read; a record whose CRC does not match is skipped (counted), never trusted.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterator

_MASK_DELTA = 0xA282EAD8


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


@dataclass(frozen=True)
class Scalar:
    step: int
    tag: str
    value: float
    wall_time: float


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) for each field of a protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: Any  # an int (varint) or the field's bytes, by its wire type
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated field")
        yield number, wire, value


def _tensor_value(buf: bytes) -> float | None:
    """A scalar TensorProto: float_val (5, packed or not), double_val (6) or tensor_content (4)."""
    dtype = None
    for number, wire, value in _fields(buf):
        if number == 1 and wire == 0:
            dtype = value
        elif number == 5 and wire == 5:
            return struct.unpack("<f", value)[0]
        elif number == 5 and wire == 2 and len(value) >= 4:
            return struct.unpack("<f", value[:4])[0]
        elif number == 6 and wire == 1:
            return struct.unpack("<d", value)[0]
        elif number == 4 and wire == 2:
            if dtype in (None, 1) and len(value) == 4:
                return struct.unpack("<f", value)[0]
            if dtype == 2 and len(value) == 8:
                return struct.unpack("<d", value)[0]
    return None


def decode_event(data: bytes) -> list[Scalar]:
    wall_time, step, values = 0.0, 0, []
    for number, wire, value in _fields(data):
        if number == 1 and wire == 1:
            wall_time = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            step = value
        elif number == 5 and wire == 2:
            for n, w, item in _fields(value):
                if n == 1 and w == 2:
                    tag, scalar = None, None
                    for vn, vw, v in _fields(item):
                        if vn == 1 and vw == 2:
                            tag = v.decode("utf-8", errors="replace")
                        elif vn == 2 and vw == 5:
                            scalar = struct.unpack("<f", v)[0]
                        elif vn == 8 and vw == 2:
                            scalar = _tensor_value(v)
                    if tag is not None and scalar is not None:
                        values.append((tag, scalar))
    if step >= 1 << 63:
        step -= 1 << 64
    return [Scalar(step, tag, value, wall_time) for tag, value in values]


@dataclass
class EventReader:
    """Records from a byte stream fed in pieces; `offset` is where the next unread record starts."""

    offset: int = 0
    corrupt: int = 0  # records skipped for a CRC mismatch
    _buffer: bytes = b""
    scalars: list = field(default_factory=list)

    @property
    def read_to(self) -> int:
        """The file offset its bytes reach (records read, plus a cut record waiting for its rest)."""
        return self.offset + len(self._buffer)

    def feed(self, data: bytes) -> list[Scalar]:
        buf = self._buffer + data
        pos, found = 0, []
        while len(buf) - pos >= 12:
            header = buf[pos:pos + 8]
            (length,) = struct.unpack("<Q", header)
            (length_crc,) = struct.unpack("<I", buf[pos + 8:pos + 12])
            if masked_crc(header) != length_crc or length > 64 * 1024 * 1024:
                # not a record boundary (junk, or a torn write): resynchronise one byte on
                self.corrupt += 1
                pos += 1
                continue
            end = pos + 12 + length + 4
            if end > len(buf):
                break  # cut mid-record: the rest comes with the next read
            payload = buf[pos + 12:pos + 12 + length]
            (data_crc,) = struct.unpack("<I", buf[end - 4:end])
            pos = end
            if masked_crc(payload) != data_crc:
                self.corrupt += 1
                continue
            try:
                found.extend(decode_event(payload))
            except (ValueError, struct.error):
                self.corrupt += 1
        self.offset += pos
        self._buffer = buf[pos:]
        if len(self._buffer) > 64 * 1024 * 1024:
            self._buffer = b""
        self.scalars.extend(found)
        return found


def encode_record(payload: bytes) -> bytes:
    """One TFRecord (for writing test files the way TensorBoard's writer frames them)."""
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", masked_crc(header)) + payload + struct.pack("<I", masked_crc(payload))
