"""The one gate every file read from a checkpoint passes (docs/security.md, "Checkpoints").

* A name from the checkpoint (a shard index entry) is a plain relative path: absolute paths and
  `..` that climb out are refused from the name alone, before anything is looked up.
* A symbolic link is followed only to a file inside the folder (or, for a Hugging Face cache
  snapshot `.../snapshots/<rev>/`, inside the same repository's `blobs/`); a link out is refused
  from where it points, never from what is there, so no message says whether an outside file exists.
* Only regular files are opened (no FIFOs, devices, sockets or folders), without blocking, and
  each kind of file has a size bound; a safetensors header is at most 100 MB (safetensors' own
  limit) and must describe tensors that lie inside the file, each exactly as long as its shape says.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Dict, Optional, Tuple

from .errors import ConvertError

MAX_JSON_BYTES = 256 * 1024**2
MAX_TEXT_BYTES = 4 * 1024**2
MAX_HEADER_BYTES = 100_000_000
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
               "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")

Shapes = Dict[str, Tuple[str, Tuple[int, ...]]]


def _roots(folder: str) -> Tuple[str, ...]:
    real = os.path.realpath(folder)
    parent = os.path.dirname(real)
    if os.path.basename(parent) == "snapshots":  # huggingface_hub's cache: snapshots/<rev>/name -> ../../blobs/<hash>
        return real, os.path.join(os.path.dirname(parent), "blobs")
    return (real,)


def _within(path: str, roots: Tuple[str, ...]) -> bool:
    return any(os.path.commonpath([root, path]) == root for root in roots)


def checkpoint_path(folder: str, name: str, named_in: str) -> str:
    """`name` (read from the checkpoint file `named_in`) as a path inside `folder`, refused from the name alone if it climbs out."""
    if not isinstance(name, str) or not name or os.path.isabs(name) or "\0" in name:
        raise ConvertError(f"{named_in}: names {name!r}, not a file inside the checkpoint folder (refused)")
    norm = os.path.normpath(name)
    if norm == ".." or norm.startswith(".." + os.sep):
        raise ConvertError(f"{named_in}: names {name!r}, outside the checkpoint folder (refused)")
    return os.path.join(folder, norm)


def regular_file(path: str, folder: Optional[str] = None) -> Optional[str]:
    """The real path of `path` if it is a regular file inside `folder` (default: its own folder);
    None if there is nothing at `path`; ConvertError for a link out of the folder or a special file."""
    if not os.path.lexists(path):
        return None
    real = os.path.realpath(path)
    if not _within(real, _roots(folder if folder is not None else os.path.dirname(path))):
        raise ConvertError(f"{path}: a link out of the checkpoint folder (refused: only the folder's own files are read)")
    try:
        st = os.stat(real)
    except OSError:
        return None  # a link inside the folder to nothing
    if not stat.S_ISREG(st.st_mode):
        raise ConvertError(f"{path}: not a regular file (a FIFO, device, socket or folder is refused)")
    return real


def read_bytes(path: str, limit: int, kind: str, folder: Optional[str] = None) -> Optional[bytes]:
    """The bytes of a checkpoint file through the gate, at most `limit`; None if missing."""
    real = regular_file(path, folder)
    if real is None:
        return None
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConvertError(f"{path}: not a regular file (a FIFO, device, socket or folder is refused)")
        if st.st_size > limit:
            raise ConvertError(f"{path}: {st.st_size} bytes; a {kind} may have at most {limit} (refused)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ConvertError(f"{path}: more than {limit} bytes; a {kind} may have at most {limit} (refused)")
    return data


def parse_json(path: str, data: bytes):
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ConvertError(f"{path}: not readable JSON ({err})") from None
    except RecursionError:
        raise ConvertError(f"{path}: not readable JSON (nested too deeply)") from None


def safetensors_header(path: str, folder: str) -> Shapes:
    """Every tensor's dtype and shape from a safetensors file's header, checked against the file's size."""
    real = regular_file(path, folder)
    if real is None:
        raise ConvertError(f"{path}: missing")
    with open(real, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) < 8:
            raise ConvertError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
        n = int.from_bytes(head, "little")
        if n > MAX_HEADER_BYTES or n > size - 8:
            raise ConvertError(f"{path}: not a safetensors file (header of {n} bytes in a file of {size}; at most {MAX_HEADER_BYTES})")
        header = parse_json(path, f.read(n))
    if not isinstance(header, dict):
        raise ConvertError(f"{path}: not a safetensors file (its header is not a JSON object)")
    data_bytes = size - 8 - n
    out: Shapes = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        ok = (dtype in DTYPE_BYTES and isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
              and isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets))
        if not ok:
            raise ConvertError(f"{path}: tensor {key!r} has no valid dtype, shape and data_offsets in the header")
        count = 1
        for d in shape:
            count *= d
        begin, end = offsets
        if not 0 <= begin <= end <= data_bytes or end - begin != count * DTYPE_BYTES[dtype]:
            raise ConvertError(f"{path}: tensor {key!r} ({dtype} {shape}) does not lie in the file as its header says (refused)")
        out[key] = (dtype, tuple(shape))
    return out


def unread_files(folder: str) -> list:
    """The folder's files the converter never loads: code (`*.py`, named by config.json's auto_map) and pickles."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [n for n in names if n.endswith(".py") or n.endswith(PICKLE_SUFFIXES)]
