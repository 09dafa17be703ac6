"""Kafka error codes by name, for the fake broker's answers.

Role: the fake answers with error codes; it names them here once, each taken
from its generated class in :mod:`kpax.proto.error_codes` (no number is written
outside kpax.proto), and :func:`code_of_name` turns a name given by a test
(``fake.inject(error="NOT_LEADER_OR_FOLLOWER")``) into its code.

Imports: kpax.proto.error_codes, kpax.proto.errors.
"""

from __future__ import annotations

from kpax.proto import error_codes as _ec
from kpax.proto.errors import BrokerResponseError


def _c(cls: type[BrokerResponseError]) -> int:
    code = cls.code
    assert code is not None
    return code


NONE = 0
OFFSET_OUT_OF_RANGE = _c(_ec.OffsetOutOfRangeError)
CORRUPT_MESSAGE = _c(_ec.CorruptMessageError)
UNKNOWN_TOPIC_OR_PARTITION = _c(_ec.UnknownTopicOrPartitionError)
INVALID_FETCH_SIZE = _c(_ec.InvalidFetchSizeError)
LEADER_NOT_AVAILABLE = _c(_ec.LeaderNotAvailableError)
NOT_LEADER_OR_FOLLOWER = _c(_ec.NotLeaderOrFollowerError)
NOT_ENOUGH_REPLICAS = _c(_ec.NotEnoughReplicasError)
REQUEST_TIMED_OUT = _c(_ec.RequestTimedOutError)
MESSAGE_TOO_LARGE = _c(_ec.MessageTooLargeError)
COORDINATOR_NOT_AVAILABLE = _c(_ec.CoordinatorNotAvailableError)
NOT_COORDINATOR = _c(_ec.NotCoordinatorError)
INVALID_TOPIC_EXCEPTION = _c(_ec.InvalidTopicError)
RECORD_LIST_TOO_LARGE = _c(_ec.RecordListTooLargeError)
INVALID_REQUIRED_ACKS = _c(_ec.InvalidRequiredAcksError)
ILLEGAL_GENERATION = _c(_ec.IllegalGenerationError)
INCONSISTENT_GROUP_PROTOCOL = _c(_ec.InconsistentGroupProtocolError)
INVALID_GROUP_ID = _c(_ec.InvalidGroupIdError)
UNKNOWN_MEMBER_ID = _c(_ec.UnknownMemberIdError)
INVALID_SESSION_TIMEOUT = _c(_ec.InvalidSessionTimeoutError)
REBALANCE_IN_PROGRESS = _c(_ec.RebalanceInProgressError)
INVALID_COMMIT_OFFSET_SIZE = _c(_ec.InvalidCommitOffsetSizeError)
INVALID_TIMESTAMP = _c(_ec.InvalidTimestampError)
UNSUPPORTED_VERSION = _c(_ec.UnsupportedVersionError)
TOPIC_ALREADY_EXISTS = _c(_ec.TopicAlreadyExistsError)
INVALID_PARTITIONS = _c(_ec.InvalidPartitionsError)
INVALID_REPLICATION_FACTOR = _c(_ec.InvalidReplicationFactorError)
INVALID_REPLICA_ASSIGNMENT = _c(_ec.InvalidReplicaAssignmentError)
INVALID_CONFIG = _c(_ec.InvalidConfigError)
INVALID_REQUEST = _c(_ec.InvalidRequestError)
OUT_OF_ORDER_SEQUENCE_NUMBER = _c(_ec.OutOfOrderSequenceNumberError)
DUPLICATE_SEQUENCE_NUMBER = _c(_ec.DuplicateSequenceNumberError)
INVALID_PRODUCER_EPOCH = _c(_ec.InvalidProducerEpochError)
INVALID_TXN_STATE = _c(_ec.InvalidTxnStateError)
INVALID_PRODUCER_ID_MAPPING = _c(_ec.InvalidProducerIdMappingError)
INVALID_TRANSACTION_TIMEOUT = _c(_ec.InvalidTransactionTimeoutError)
CONCURRENT_TRANSACTIONS = _c(_ec.ConcurrentTransactionsError)
OPERATION_NOT_ATTEMPTED = _c(_ec.OperationNotAttemptedError)
UNKNOWN_PRODUCER_ID = _c(_ec.UnknownProducerIdError)
NON_EMPTY_GROUP = _c(_ec.NonEmptyGroupError)
GROUP_ID_NOT_FOUND = _c(_ec.GroupIdNotFoundError)
FETCH_SESSION_ID_NOT_FOUND = _c(_ec.FetchSessionIdNotFoundError)
INVALID_FETCH_SESSION_EPOCH = _c(_ec.InvalidFetchSessionEpochError)
FENCED_LEADER_EPOCH = _c(_ec.FencedLeaderEpochError)
UNKNOWN_LEADER_EPOCH = _c(_ec.UnknownLeaderEpochError)
UNSUPPORTED_COMPRESSION_TYPE = _c(_ec.UnsupportedCompressionTypeError)
MEMBER_ID_REQUIRED = _c(_ec.MemberIdRequiredError)
FENCED_INSTANCE_ID = _c(_ec.FencedInstanceIdError)
GROUP_SUBSCRIBED_TO_TOPIC = _c(_ec.GroupSubscribedToTopicError)
INVALID_RECORD = _c(_ec.InvalidRecordError)
INVALID_RECORD_STATE = _c(_ec.InvalidRecordStateError)
SHARE_SESSION_NOT_FOUND = _c(_ec.ShareSessionNotFoundError)
INVALID_SHARE_SESSION_EPOCH = _c(_ec.InvalidShareSessionEpochError)
UNSTABLE_OFFSET_COMMIT = _c(_ec.UnstableOffsetCommitError)
PRODUCER_FENCED = _c(_ec.ProducerFencedError)
RESOURCE_NOT_FOUND = _c(_ec.ResourceNotFoundError)
UNKNOWN_TOPIC_ID = _c(_ec.UnknownTopicIdError)
FENCED_MEMBER_EPOCH = _c(_ec.FencedMemberEpochError)
UNRELEASED_INSTANCE_ID = _c(_ec.UnreleasedInstanceIdError)
UNSUPPORTED_ASSIGNOR = _c(_ec.UnsupportedAssignorError)
STALE_MEMBER_EPOCH = _c(_ec.StaleMemberEpochError)
UNSUPPORTED_ENDPOINT_TYPE = _c(_ec.UnsupportedEndpointTypeError)
TRANSACTION_ABORTABLE = _c(_ec.TransactionAbortableError)
INVALID_REGULAR_EXPRESSION = _c(_ec.InvalidRegularExpressionError)
OFFSET_METADATA_TOO_LARGE = _c(_ec.OffsetMetadataTooLargeError)
TOPIC_DELETION_DISABLED = _c(_ec.TopicDeletionDisabledError)
KAFKA_STORAGE_ERROR = _c(_ec.KafkaStorageError)
UNKNOWN_SERVER_ERROR = _c(_ec.UnknownServerError)
GROUP_MAX_SIZE_REACHED = _c(_ec.GroupMaxSizeReachedError)
INCONSISTENT_TOPIC_ID = _c(_ec.InconsistentTopicIdError)

_BY_NAME: dict[str, int] = {
    cls.name: _c(cls)
    for cls in (getattr(_ec, n) for n in _ec.__all__)
    if isinstance(cls, type) and issubclass(cls, BrokerResponseError)
}


def code_of_name(name: str | int | type[BrokerResponseError]) -> int:
    """The code of a Kafka error given by name (``"NOT_LEADER_OR_FOLLOWER"``), by its
    kpax exception class, or already as a code."""
    if isinstance(name, int):
        return name
    if isinstance(name, type):
        return _c(name)
    try:
        return _BY_NAME[name.upper()]
    except KeyError:
        raise ValueError(f"unknown Kafka error name {name!r}") from None


def name_of_code(code: int) -> str:
    """The Kafka name of an error code ("NONE" for 0)."""
    if code == NONE:
        return "NONE"
    for name, value in _BY_NAME.items():
        if value == code:
            return name
    return str(code)


class ApiError(Exception):
    """A request the fake refuses: the error code to answer with, and why."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or name_of_code(code))
        self.code = code
        self.message = message
