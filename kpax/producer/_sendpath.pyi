"""Type stubs of the optional C send path (see _sendpath.c for the contract)."""

from collections.abc import Callable
from typing import Any

class Lock:
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...
    def release(self) -> None: ...
    def locked(self) -> bool: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *exc: object) -> None: ...

def murmur2(data: bytes, /) -> int: ...

class Appender:
    enabled: bool
    def __init__(
        self,
        accumulator: Any,
        num_partitions: dict[str, int],
        future_type: type,
        max_record: int,
        slow: Callable[..., Any],
    ) -> None: ...
    def try_append(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        /,
    ) -> Any: ...
    def send(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> Any: ...
