"""Wait for eventually-consistent cluster state (KRaft propagates metadata and
config changes to brokers asynchronously, as every Kafka client sees)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], timeout: float = 15.0, interval: float = 0.1) -> T:
    """Call ``check`` until it returns a truthy value without raising
    AssertionError; return that value, or re-raise the last failure."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
            failure: BaseException = AssertionError(f"{check} stayed falsy for {timeout}s")
        except AssertionError as exc:
            failure = exc
        if time.monotonic() > deadline:
            raise failure
        time.sleep(interval)
