"""The generated broker error classes (kpax.proto.error_codes, from errors.tsv)."""

from __future__ import annotations

import kpax.errors
from kpax.proto import error_codes
from kpax.proto.errors import (
    AuthenticationError,
    AuthorizationError,
    BrokerResponseError,
    KafkaError,
    error_for_code,
    raise_for_code,
)


def test_names_and_codes() -> None:
    assert error_codes.OffsetOutOfRangeError.code == 1
    assert error_codes.NotLeaderOrFollowerError.code == 6
    assert error_codes.NotLeaderOrFollowerError.name == "NOT_LEADER_OR_FOLLOWER"
    assert error_codes.ProducerFencedError.code == 90
    assert error_codes.UnknownServerError.code == -1
    assert error_for_code(6) is error_codes.NotLeaderOrFollowerError
    assert error_for_code(3) is error_codes.UnknownTopicOrPartitionError


def test_every_code_has_a_class_but_none() -> None:
    classes = [getattr(error_codes, n) for n in error_codes.__all__]
    codes = {c.code for c in classes}
    assert 0 not in codes
    assert len(codes) == len(classes) == 137  # Kafka 4.4: -1 and 1..136
    for cls in classes:
        assert issubclass(cls, BrokerResponseError)
        assert issubclass(cls, KafkaError)
        assert cls.__name__.endswith("Error")
        assert cls.description and "\n" not in cls.description
        assert error_for_code(cls.code) is cls  # type: ignore[arg-type]
        assert getattr(kpax.errors, cls.__name__) is cls


def test_retriable_from_tsv() -> None:
    assert error_codes.NotLeaderOrFollowerError.retriable
    assert error_codes.UnknownTopicOrPartitionError.retriable
    assert not error_codes.TopicAuthorizationFailedError.retriable
    assert not error_codes.OffsetOutOfRangeError.retriable


def test_auth_bases() -> None:
    for cls in (
        error_codes.TopicAuthorizationFailedError,
        error_codes.GroupAuthorizationFailedError,
        error_codes.ClusterAuthorizationFailedError,
        error_codes.TransactionalIdAuthorizationFailedError,
        error_codes.DelegationTokenAuthorizationFailedError,
    ):
        assert issubclass(cls, AuthorizationError)
    for cls in (
        error_codes.SaslAuthenticationFailedError,
        error_codes.IllegalSaslStateError,
        error_codes.UnsupportedSaslMechanismError,
    ):
        assert issubclass(cls, AuthenticationError)
    assert not issubclass(error_codes.NotLeaderOrFollowerError, AuthorizationError)


def test_message_names_context() -> None:
    try:
        raise_for_code(6, "produce to orders-3 on broker 1", error_message="moved")
    except error_codes.NotLeaderOrFollowerError as exc:
        text = str(exc)
        assert "NOT_LEADER_OR_FOLLOWER [6]" in text
        assert "orders-3" in text
        assert "moved" in text
        assert exc.retriable and "retriable" not in text
    else:
        raise AssertionError("no error raised")
