"""safetensors headers, read and checked without touching the tensors.

Format: 8 bytes little-endian header length N, N bytes of JSON (padded with spaces), then the data.
Each tensor: {"dtype", "shape", "data_offsets": [begin, end]} relative to the data start.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.errors import CockpitError

DTYPE_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit


class HeaderError(CockpitError):
    """A file is not a valid safetensors file; the message names the file and what is wrong."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True)
class Header:
    path: str
    header_len: int  # N: the JSON's length in the file, padding included
    file_size: int
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] | None
    raw: dict[str, Any]

    @property
    def data_start(self) -> int:
        return 8 + self.header_len

    @property
    def data_size(self) -> int:
        return self.file_size - self.data_start


def parse_header_bytes(prefix: bytes, header_bytes: bytes, file_size: int, path: str = "<bytes>") -> Header:
    (length,) = struct.unpack("<Q", prefix)
    try:
        text = header_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_safetensors(Path(path), prefix + header_bytes[:56], f"the header is not UTF-8 (byte {exc.start})") from None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise _not_safetensors(Path(path), prefix + header_bytes[:56], f"the header is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise HeaderError(f"{path}: the header is not a JSON object")
    data_size = file_size - 8 - length
    tensors: dict[str, TensorInfo] = {}
    metadata = raw.get("__metadata__")
    if metadata is not None and (not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())):
        raise HeaderError(f"{path}: __metadata__ must map strings to strings")
    spans = []
    for name, entry in raw.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
            raise HeaderError(f"{path}: tensor '{name}' lacks dtype, shape or data_offsets")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
            raise HeaderError(f"{path}: tensor '{name}' has an unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise HeaderError(f"{path}: tensor '{name}' has a bad shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
            raise HeaderError(f"{path}: tensor '{name}' has bad data_offsets {offsets!r}")
        begin, end = offsets
        if not 0 <= begin <= end <= data_size:
            raise HeaderError(f"{path}: tensor '{name}' offsets [{begin}, {end}] lie outside the data ({data_size} bytes)")
        expected = math.prod(shape) * DTYPE_SIZES[dtype]
        if end - begin != expected:
            raise HeaderError(f"{path}: tensor '{name}' spans {end - begin} bytes, its shape {shape} of {dtype} needs {expected}")
        tensors[name] = TensorInfo(name, dtype, tuple(shape), begin, end)
        spans.append((begin, end, name))
    spans.sort()
    for (b1, e1, n1), (b2, e2, n2) in zip(spans, spans[1:]):
        if b2 < e1:
            raise HeaderError(f"{path}: tensors '{n1}' and '{n2}' overlap ([{b1}, {e1}] and [{b2}, {e2}])")
    return Header(path, length, file_size, tensors, metadata, raw)


def what_it_is(head: bytes) -> str | None:
    """What a file that is not safetensors looks like, from its first bytes (None: no idea)."""
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive: a PyTorch checkpoint saved by torch.save (convert it with `cockpit drafter convert`)"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "a Python pickle: a PyTorch checkpoint in torch.save's legacy format (convert it with `cockpit drafter convert`)"
    if head.startswith(b"GGUF"):
        return "a GGUF file (llama.cpp), not an EAGLE-3 draft SGLang loads"
    if head.startswith(b"\x89HDF"):
        return "an HDF5 file (Keras/TensorFlow weights)"
    if head.startswith(b"\x93NUMPY"):
        return "a NumPy .npy array"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "JSON text (a config or an index?), not weights"
    if head and all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        return "a text file"
    return None


def _not_safetensors(path: Path, head: bytes, why: str) -> HeaderError:
    looks = what_it_is(head)
    if looks:
        return HeaderError(f"{path}: not a safetensors file; it is {looks}")
    return HeaderError(f"{path}: not a safetensors file ({why})")


def header_from(read, size: int, path: str | Path) -> Header:
    """Read and check one file's header through `read(offset, size) -> bytes`: 8 + N bytes, never
    the tensors (a local file, or one on a host over SFTP)."""
    head = read(0, min(64, size))
    length = header_length(head, size, path)
    return parse_header_bytes(head[:8], read(8, length), size, str(path))


def header_length(head: bytes, size: int, path: str | Path) -> int:
    """N from a file's first bytes (up to 64 of them), checked against the file's size; raises
    HeaderError naming what the file is when it is not safetensors."""
    prefix = head[:8]
    if len(prefix) < 8:
        raise _not_safetensors(Path(path), head, f"only {size} bytes long")
    (length,) = struct.unpack("<Q", prefix)
    if length > MAX_HEADER:
        raise _not_safetensors(Path(path), head, f"its first 8 bytes give a header length of {length}, beyond safetensors' limit")
    if 8 + length > size:
        if what_it_is(head):
            raise _not_safetensors(Path(path), head, "")
        raise HeaderError(f"{path}: header length {length} runs past the end of the file ({size} bytes): truncated?")
    return length


def read_header(path: str | Path) -> Header:
    """Read and check one file's header: reads 8 + N bytes, never the tensors."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)

            def read(offset: int, count: int) -> bytes:
                handle.seek(offset)
                return handle.read(count)

            return header_from(read, size, path)
    except IsADirectoryError:
        raise HeaderError(f"{path}: is a directory") from None
    except OSError as exc:
        raise HeaderError(f"{path}: {exc.strerror or exc}") from None


def encode_header(raw: dict[str, Any], length: int | None = None) -> bytes:
    """JSON bytes of a header; padded with spaces to `length` when given (the in-place case) or to a
    multiple of 8 (as safetensors writes it)."""
    text = json.dumps(raw, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if length is not None:
        if len(text) > length:
            raise ValueError("header does not fit")
        return text + b" " * (length - len(text))
    return text + b" " * ((8 - len(text) % 8) % 8)
