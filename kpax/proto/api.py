"""Base classes of every generated protocol message and struct.

Role: the interface other layers rely on. A generated message class (in
:mod:`kpax.proto.messages`) subclasses :class:`Request`, :class:`Response` or
:class:`Data` and carries its metadata as class attributes (``API_KEY``,
``API_NAME``, ``MIN_VERSION``, ``MAX_VERSION``, ``FLEXIBLE_VERSION``,
``RESPONSE``/``REQUEST``) plus per-version encoder/decoder tables filled in by
the generated module. ``encode(version)`` and ``decode(data, version)`` here
only dispatch to the straight-line per-version functions and turn low-level
failures into :class:`~kpax.proto.errors.ProtocolError` (decode) or
:class:`~kpax.proto.errors.InvalidMessageError` (encode).

Imports: the standard library and kpax.proto.errors only.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from kpax.proto.errors import InvalidMessageError, ProtocolError

__all__ = ["Data", "Message", "Request", "Response", "Struct"]

_M = TypeVar("_M", bound="Message")

Encoder = Callable[[bytearray, Any], None]
Decoder = Callable[[memoryview, int], tuple[Any, int]]

# What a decoder may raise on truncated or garbage input besides ProtocolError.
_DECODE_FAILURES = (
    struct.error,
    IndexError,
    ValueError,
    TypeError,
    OverflowError,
    UnicodeDecodeError,
    MemoryError,
    RecursionError,
)


class Struct:
    """A message or nested struct: slotted fields plus ``unknown_tags``.

    ``unknown_tags`` holds tagged fields this version of kpax does not know
    (tag -> raw payload) as read by ``decode``; they are written back by
    ``encode``. It is None when there are none.
    """

    __slots__ = ("unknown_tags",)

    unknown_tags: dict[int, bytes] | None

    def _fields(self) -> list[str]:
        names: list[str] = []
        for klass in reversed(type(self).__mro__):
            names.extend(klass.__dict__.get("__slots__", ()))
        return names

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._fields())

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = []
        for n in self._fields():
            v = getattr(self, n)
            if n == "unknown_tags" and not v:
                continue
            if isinstance(v, memoryview):
                parts.append(f"{n}=<{v.nbytes} bytes>")
            else:
                parts.append(f"{n}={v!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"


class Message(Struct):
    """A top-level message with per-version encoders and decoders."""

    __slots__ = ()

    API_NAME: ClassVar[str]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    #: First flexible (compact, tagged) version, or None if never flexible.
    FLEXIBLE_VERSION: ClassVar[int | None]
    _ENCODERS: ClassVar[dict[int, Encoder]] = {}
    _DECODERS: ClassVar[dict[int, Decoder]] = {}

    @classmethod
    def _bad_version(cls, version: int) -> InvalidMessageError:
        return InvalidMessageError(
            f"{cls.__name__} has no version {version}: "
            f"valid versions are {cls.MIN_VERSION}-{cls.MAX_VERSION}"
        )

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        """Whether ``version`` uses the compact encodings and tagged fields."""
        return cls.FLEXIBLE_VERSION is not None and version >= cls.FLEXIBLE_VERSION

    def encode_into(self, buf: bytearray, version: int) -> None:
        """Append this message's body in ``version`` to ``buf``."""
        enc = self._ENCODERS.get(version)
        if enc is None:
            raise self._bad_version(version)
        try:
            enc(buf, self)
        except InvalidMessageError as exc:
            raise InvalidMessageError(
                f"cannot encode {type(self).__name__} v{version}: {exc.message}"
            ) from None
        except (struct.error, AttributeError, TypeError, OverflowError, ValueError) as exc:
            raise InvalidMessageError(
                f"cannot encode {type(self).__name__} v{version}: {exc}"
            ) from exc

    def encode(self, version: int) -> bytes:
        """The message body in ``version`` (no header, no size prefix)."""
        buf = bytearray()
        self.encode_into(buf, version)
        return bytes(buf)

    @classmethod
    def decode(cls: type[_M], data: bytes | bytearray | memoryview, version: int) -> _M:
        """Parse a whole message body of ``version``; bad bytes raise ProtocolError.

        ``records`` fields come back as zero-copy ``memoryview`` slices of ``data``.
        """
        obj, pos = cls.decode_from(data, 0, version)
        size = len(data) if not isinstance(data, memoryview) else data.nbytes
        if pos != size:
            raise ProtocolError(
                f"{cls.__name__} v{version}: {size - pos} unexpected bytes after the message"
            )
        return obj

    @classmethod
    def decode_from(
        cls: type[_M], data: bytes | bytearray | memoryview, pos: int, version: int
    ) -> tuple[_M, int]:
        """Parse a message starting at ``pos``; returns it and the position after it."""
        dec = cls._DECODERS.get(version)
        if dec is None:
            raise cls._bad_version(version)
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        try:
            obj, end = dec(view, pos)
        except ProtocolError as exc:
            raise ProtocolError(f"cannot decode {cls.__name__} v{version}: {exc.message}") from None
        except _DECODE_FAILURES as exc:
            raise ProtocolError(
                f"cannot decode {cls.__name__} v{version}: truncated or malformed ({exc})"
            ) from None
        return obj, end


class Request(Message):
    """A request message."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    RESPONSE: ClassVar[type[Response]]


class Response(Message):
    """A response message."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    REQUEST: ClassVar[type[Request]]


class Data(Message):
    """A standalone versioned data type (headers, consumer protocol, control records)."""

    __slots__ = ()
