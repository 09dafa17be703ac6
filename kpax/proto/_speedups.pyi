"""Type stubs of the optional C accelerator (see _speedups.c for the contract)."""

from collections.abc import Sequence
from typing import Any, TypeVar

_T = TypeVar("_T", bound=tuple[Any, ...])

def encode_records(
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None,
    base_timestamp: int,
    /,
) -> bytes: ...
def encode_batch(
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None,
    base_timestamp: int,
    base_offset: int,
    attributes: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    /,
) -> bytes: ...
def encode_batch_lz4(
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None,
    base_timestamp: int,
    base_offset: int,
    attributes: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    frame_header: bytes,
    /,
) -> bytes: ...
def parse_records(
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    template: tuple[Any, ...] | None = None,
    slots: tuple[int, int, int, int, int] | None = None,
    timestamp: int | None = None,
    min_offset: int | None = None,
) -> list[Any]: ...
def scan_records(
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    min_offset: int | None = None,
    /,
) -> int: ...
def encode_produce(
    version: int,
    correlation_id: int,
    client_id: str | None,
    transactional_id: str | None,
    acks: int,
    timeout_ms: int,
    topics: Any,
    /,
) -> Any: ...
def decode_produce_response(frame: bytes | bytearray | memoryview, version: int, /) -> Any: ...
def crc32c(data: bytes | bytearray | memoryview, value: int = 0, /) -> int: ...
def crc32c_hardware() -> bool: ...
def crc32c_software(data: bytes | bytearray | memoryview, value: int = 0, /) -> int: ...
def lz4_decode_blocks(
    data: bytes | bytearray | memoryview,
    pos: int,
    max_block: int,
    block_checksum: int,
    max_size: int,
    /,
) -> bytes | None: ...
def lz4_frame(data: bytes | bytearray | memoryview, header: bytes, /) -> bytes: ...
def walk_batches(
    data: bytes | bytearray | memoryview,
    validate_crc: bool,
    check_records: bool,
    min_offset: int | None = None,
    borrow: bool = False,
    /,
) -> tuple[bytes | memoryview, list[int], int]: ...
def frame_buffer(size: int, /) -> bytearray: ...
def adopt_record(type: type[tuple[Any, ...]], nfields: int, /) -> None:
    """Make a NamedTuple record type cheaper to build, read and free (right after
    making it): its fields read as member descriptors, its freed instances reused."""

def untrack(t: _T, /) -> _T: ...
def recv_rest(
    fd: int, buffer: bytearray, pos: int, end: int, budget_us: int, idle_us: int, /
) -> tuple[int, int]: ...
def walk_many(
    datas: list[bytes | bytearray | memoryview],
    min_offsets: list[int | None],
    validate_crc: bool,
    check_records: bool,
    borrow: bool,
    /,
) -> list[tuple[bytes | memoryview, list[int], int]]: ...
