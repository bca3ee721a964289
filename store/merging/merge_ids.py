"""The id of a merged row (contract C2.7), computed for a whole merge at once.

An id is a pure function of its parts, in this order: the merge mode; the vessel key;
the port; the commodity key; the group's earliest anchor, to the minute; the group's
merged shipper, receiver and charterer in their C2.4 comparison form; under
`by_source` the feed id; and, for a record that could not merge (no date, C2.3), the
record's own feed id and ref — so that two dateless records of one key still get two
ids. A part that is absent counts as a distinct "null".

How: every distinct string is hashed once with BLAKE2b-128 (personalised, UTF-8, with
a marker byte that keeps "null" apart from any string); the per-row parts are then
folded together lane by lane (two 64-bit lanes) with the splitmix64 finalizer, a
bijection, in numpy; 120 of the 128 bits are written as 24 characters of lowercase
base32 (a–z, 2–7): URL-safe, and never starting with a character that C9 would
neutralise in CSV (`-`, `=`, `+`, `@`).
Only integer arithmetic modulo 2**64 on little-endian bytes is involved, so the same
parts give the same id in every process, on every machine, in every run; Python's
salted `hash()` is never used. Any change of a part gives another id (a collision
needs two different part lists to meet in 120 bits).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

_PERSON = b"lineups-row-id"
_LANE_SALTS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD1B54A32D192ED03))
_ID_BYTES = 15  # 120 bits: 24 base32 characters, no padding
ID_LENGTH = 24
_TEXT = hashlib.blake2b(b"\x01", digest_size=16, person=_PERSON)
_NULL = hashlib.blake2b(b"\x00", digest_size=16, person=_PERSON).digest()


def text_hashes(values: Sequence[str | None]) -> np.ndarray:
    """A (n, 2) uint64 array: the two 64-bit lanes of each value's BLAKE2b-128 digest.
    None hashes to a value that no string can produce."""
    digests = []
    for value in values:
        if value is None:
            digests.append(_NULL)
        else:
            h = _TEXT.copy()
            h.update(str(value).encode("utf-8"))
            digests.append(h.digest())
    return np.frombuffer(b"".join(digests), dtype="<u8").reshape(len(values), 2).astype(np.uint64)


def minute_hashes(nanoseconds: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """A (n, 2) uint64 array for times given as int64 ns, floored to the minute;
    rows where `missing` is True get the "null" value of `text_hashes`."""
    minutes = (nanoseconds // (60 * 10**9)).astype(np.int64).view(np.uint64)
    lanes = np.column_stack([_mix(minutes ^ salt) for salt in _LANE_SALTS])  # copies, then mixes
    lanes[missing] = text_hashes([None])[0]
    return lanes


def row_ids(mode: str, parts: Iterable[np.ndarray], n: int) -> np.ndarray:
    """The ids of `n` rows (object array of str) from `mode` and per-row part hashes,
    each a (n, 2) uint64 array from `text_hashes` or `minute_hashes`, in C2.7 order."""
    lanes = np.tile(text_hashes([f"merge={mode}"]), (n, 1))
    scratch = np.empty_like(lanes)
    for part in parts:
        lanes ^= part
        _mix(lanes, scratch)
    return _encode(lanes)


def _mix(x: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """The splitmix64 finalizer, elementwise (a bijection of uint64), in place."""
    scratch = np.empty_like(x) if scratch is None else scratch
    for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, None)):
        np.right_shift(x, np.uint64(shift), out=scratch)
        x ^= scratch
        if factor is not None:
            x *= np.uint64(factor)
    return x


#: RFC 4648 base32 in lower case, as `base64.b32encode(...).lower()` writes it.
_BASE32 = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz234567", dtype=np.uint8)


def _encode(lanes: np.ndarray) -> np.ndarray:
    """The first 15 bytes of each row's lanes in base32: 24 characters, the same text
    as `base64.b32encode` gives, computed in numpy (the base64 module loops in
    Python)."""
    n = len(lanes)
    raw = np.ascontiguousarray(lanes, dtype="<u8").view(np.uint8).reshape(n, 16)[:, :_ID_BYTES]
    # Each 5 bytes (40 bits, big-endian) make 8 characters of 5 bits.
    groups = raw.reshape(n, 3, 5).astype(np.uint64)
    bits = np.zeros((n, 3), dtype=np.uint64)
    for byte in range(5):
        bits = (bits << np.uint64(8)) | groups[:, :, byte]
    shifts = np.arange(35, -1, -5, dtype=np.uint64)
    digits = (bits[:, :, None] >> shifts) & np.uint64(31)
    text = _BASE32[digits.reshape(n, ID_LENGTH)]
    # ASCII widened to UCS-4 is numpy's unicode layout: one 24-character string per id.
    return text.astype("<u4").view(f"<U{ID_LENGTH}").reshape(n).astype(object)
