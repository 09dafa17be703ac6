"""Control records: the transaction markers (COMMIT/ABORT) of control batches.

Role: encode and decode the key (version i16, type i16) and value (version i16,
coordinator_epoch i32) of a control record, as written by transaction
coordinators in batches whose attributes have the control bit set.

Imports: the standard library and kpax.proto.errors only.
"""

from __future__ import annotations

import struct
from typing import Final

from kpax.proto.errors import CorruptRecordError

__all__ = ["ABORT", "COMMIT", "ControlRecord"]

ABORT: Final = 0
COMMIT: Final = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecord:
    """A transaction marker. ``type`` is ABORT (0) or COMMIT (1)."""

    __slots__ = ("coordinator_epoch", "offset", "timestamp", "type", "version")

    #: Control records never carry user data.
    key = None
    value = None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    def __init__(
        self,
        type: int,
        coordinator_epoch: int = 0,
        *,
        version: int = 0,
        offset: int = -1,
        timestamp: int = -1,
    ) -> None:
        self.type = type
        self.coordinator_epoch = coordinator_epoch
        self.version = version
        self.offset = offset
        self.timestamp = timestamp

    @property
    def is_commit(self) -> bool:
        return self.type == COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ABORT

    def encode_key(self) -> bytes:
        return _KEY.pack(self.version, self.type)

    def encode_value(self) -> bytes:
        return _VALUE.pack(self.version, self.coordinator_epoch)

    @classmethod
    def decode(
        cls, offset: int, timestamp: int, key: bytes | None, value: bytes | None
    ) -> ControlRecord:
        if key is None or len(key) < 4:
            raise CorruptRecordError(f"control record at offset {offset} has a bad key {key!r}")
        version, ctype = _KEY.unpack_from(key)
        epoch = 0
        if value is not None and len(value) >= 6:
            _v, epoch = _VALUE.unpack_from(value)
        elif ctype in (ABORT, COMMIT):
            raise CorruptRecordError(
                f"control record at offset {offset} has a bad marker value {value!r}"
            )
        return cls(ctype, epoch, version=version, offset=offset, timestamp=timestamp)

    def __repr__(self) -> str:
        name = {ABORT: "ABORT", COMMIT: "COMMIT"}.get(self.type, str(self.type))
        return (
            f"ControlRecord({name}, coordinator_epoch={self.coordinator_epoch}, "
            f"offset={self.offset})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ControlRecord):
            return NotImplemented
        return (self.type, self.coordinator_epoch, self.version, self.offset) == (
            other.type,
            other.coordinator_epoch,
            other.version,
            other.offset,
        )

    __hash__ = None  # type: ignore[assignment]
