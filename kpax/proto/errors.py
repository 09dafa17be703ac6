"""The kpax exception tree: client-side errors and the base of every broker error.

Role: one hierarchy under :class:`KafkaError` that every layer raises. Broker
error codes (``errors.tsv``) get one generated subclass each in
:mod:`kpax.proto.error_codes`, all deriving from :class:`BrokerResponseError`;
:func:`error_for_code` maps a code to its class.

Every error carries ``retriable`` (may the same operation succeed if tried
again?) and a message that names what failed and on what (topic, partition,
broker, group), never only a code. ``str(e)`` is that message (the class name
when there is none); whether retrying helps is the ``retriable`` attribute,
said in the message only where the message tells what to do.

The consumer's errors that no broker code names (:class:`CommitFailedError`,
:class:`RebalanceInProgressCommitError`, :class:`NoOffsetForPartitionError`,
:class:`LogTruncationError`) are here too, so that :mod:`kpax.errors` exports
the whole tree.

Imports: the standard library only (this is part of the sans-I/O layer).
"""

from __future__ import annotations

from typing import ClassVar


class KafkaError(Exception):
    """Base of every error kpax raises."""

    retriable: ClassVar[bool] = False
    #: The broker error code this class stands for, or None for client-side errors.
    code: ClassVar[int | None] = None

    def __init__(self, message: str = "", *, retriable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retriable is not None:
            # An instance may know better than its class (e.g. a connection error
            # raised after the request was possibly applied).
            self.retriable = retriable  # type: ignore[misc]

    def __str__(self) -> str:
        return self.message or self.__class__.__name__


# ---------------------------------------------------------------- client side


class ProtocolError(KafkaError):
    """Bytes from the network do not follow the Kafka protocol (truncated, bad
    length, unknown tag layout, correlation id mismatch...)."""


class RecordPosition:
    """Where a record error is, as far as known (None otherwise).

    ``topic_partition`` and ``offset`` are set by the consumer: the partition and
    its position (the first offset it did not return). ``next_offset`` is the
    first offset after the bad data, so ``consumer.seek(e.topic_partition,
    e.next_offset)`` skips it. The record decoder sets ``offset`` and
    ``next_offset`` of a bad batch from its header (which, for a batch failing its
    CRC, may be damaged too). For an ``OffsetOutOfRangeError``, ``offset`` is the
    position that is out of range and ``next_offset`` the nearest offset in range
    (the log start below it, the high watermark above it), when the consumer
    could look them up."""

    topic_partition: tuple[str, int] | None = None
    offset: int | None = None
    next_offset: int | None = None


class CorruptRecordError(RecordPosition, KafkaError):
    """A record batch or message set failed to decode: bad CRC, bad lengths,
    unknown magic or codec, or a decompressed size above the cap."""


class DecompressionLimitError(CorruptRecordError):
    """A compressed batch decompresses to more than the allowed size (the
    consumer's ``max_decompressed_batch_bytes``): a corrupt batch, a
    decompression bomb, or a large batch that needs a higher limit."""


class UnsupportedCodecError(KafkaError):
    """A compression codec is known but its library is not installed."""


class KafkaConnectionError(KafkaError):
    """A broker could not be reached, or its connection broke."""

    retriable = True


class KafkaTimeoutError(KafkaError):
    """An operation did not complete within its deadline."""

    retriable = True


class AuthenticationError(KafkaError):
    """SASL or TLS authentication failed."""


class AuthorizationError(KafkaError):
    """The principal is not allowed to do this (base of the *_AUTHORIZATION_FAILED codes)."""


class ConfigError(KafkaError, ValueError):
    """A configuration option is unknown or has a bad value."""


class SerializationError(RecordPosition, KafkaError):
    """A key or value could not be (de)serialized (the consumer sets the
    :class:`RecordPosition` of a record its deserializer failed on)."""


class IllegalStateError(KafkaError):
    """The client was used in a state that does not allow the call (e.g. after close)."""


class ClientClosedError(IllegalStateError):
    """The client has been closed. ``outcome_unknown``: for records a closing
    producer failed, True when they had been sent without an answer (they may
    have been written), False when they were never sent."""

    outcome_unknown: bool = False


class ForkedClientError(ClientClosedError):
    """The client was created in another process: this process is a child of
    ``fork()`` (``os.fork``, multiprocessing's fork start method). A client's I/O
    thread and connections stay in the process that created it, so a client
    cannot be used across fork(): create clients after fork, in the process
    that uses them."""


class InvalidMessageError(KafkaError, ValueError):
    """A protocol message cannot be built as asked: a version outside the API's
    range, a field the chosen version cannot carry, or a value out of range."""


class UnsupportedApiError(KafkaError):
    """The broker does not support an API (or any version kpax knows of it)."""


class TransactionAbortedError(KafkaError):
    """A record was dropped because its transaction was aborted before it was sent."""


class PurgedError(KafkaError):
    """A record was dropped by ``producer.purge()`` before it was sent."""

    retriable = False


class NoBrokersAvailableError(KafkaConnectionError):
    """No bootstrap address answered; the message lists each address and why."""


class BrokerIdentityError(KafkaConnectionError):
    """The broker at a node's address is not that node of that cluster any more: it
    answered ApiVersions (v5+, with the expected cluster id and node id) with
    REBOOTSTRAP_REQUIRED (KIP-1242). The client rebootstraps its metadata from the
    bootstrap addresses; the request is retried on the new metadata."""


# ---------------------------------------------------------------- consumer


class CommitFailedError(KafkaError):
    """An offset commit was rejected because this member's generation is gone
    (the group went on without it, or the member was evicted for exceeding
    ``max_poll_interval_ms``). The partitions may now belong to another member:
    this member treats them as lost (``on_partitions_lost``, no commit) and
    rejoins; whoever gets them next starts from the committed offsets."""


class RebalanceInProgressCommitError(KafkaError):
    """An offset commit was not applied because the group is rebalancing
    (Java's ``RebalanceInProgressException``): the coordinator answered
    REBALANCE_IN_PROGRESS, or the group moved to a new generation while this
    member was joining it. The member keeps its partitions; committing again
    now cannot help, but after the next ``poll()`` (which completes the
    rebalance) it can: commit again then. Not a :class:`CommitFailedError`."""


class NoOffsetForPartitionError(IllegalStateError):
    """No valid position for a partition and ``auto_offset_reset="none"``."""


class LogTruncationError(KafkaError):
    """The partition's log was truncated below the consumer's position after
    a leader change (detected through leader epochs, KIP-320)."""


# ---------------------------------------------------------------- broker side


class BrokerResponseError(KafkaError):
    """An error code returned by a broker. Subclasses are generated per code."""

    code: ClassVar[int | None] = -1
    #: The protocol name of the code, e.g. ``NOT_LEADER_OR_FOLLOWER``.
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    #: Kafka's own description of the code.
    description: ClassVar[str] = ""

    def __init__(
        self,
        message: str = "",
        *,
        retriable: bool | None = None,
        error_message: str | None = None,
    ) -> None:
        detail = message or self.description or self.name
        text = f"{self.name} [{self.code}]: {detail}"
        if error_message:
            text += f" (broker says: {error_message})"
        super().__init__(text, retriable=retriable)
        self.error_message = error_message


_BY_CODE: dict[int, type[BrokerResponseError]] = {}


def register_error(cls: type[BrokerResponseError]) -> type[BrokerResponseError]:
    """Class decorator used by the generated :mod:`kpax.proto.error_codes`."""
    assert cls.code is not None
    _BY_CODE[cls.code] = cls
    return cls


def error_for_code(code: int) -> type[BrokerResponseError]:
    """The exception class for a broker error code (an unknown code maps to a
    fresh subclass of :class:`BrokerResponseError` naming the number)."""
    # Importing here keeps the generated table out of the import cycle.
    from kpax.proto import error_codes  # noqa: F401

    cls = _BY_CODE.get(code)
    if cls is None:
        cls = type(
            f"UnknownError{code}".replace("-", "Minus"),
            (BrokerResponseError,),
            {"code": code, "name": f"UNKNOWN_CODE_{code}", "description": "unknown error code"},
        )
        _BY_CODE[code] = cls
    return cls


def raise_for_code(code: int, context: str, error_message: str | None = None) -> None:
    """Raise the error for ``code`` (no-op for 0) with a message naming ``context``,
    e.g. ``"produce to orders-3 on broker 1 (127.0.0.1:9092)"``."""
    if code:
        raise error_for_code(code)(context, error_message=error_message)
