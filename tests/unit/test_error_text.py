"""What ``str(e)`` says, for every error class kpax can raise (the generated
broker classes and the client-side ones, found by importing every kpax
module): the message, naming what failed -- no "(retriable)" / "(not
retriable)" suffix (``.retriable`` says that), never empty, never doubled."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import kpax
from kpax.proto import error_codes
from kpax.proto.errors import BrokerResponseError, ConfigError, KafkaError

SUFFIX = re.compile(r"\((not )?retriable\)")
WHAT = "fetching partition orders-3 from broker 1 (127.0.0.1:9092)"
#: Arguments of the classes whose constructor takes more than a message.
ARGS = {"TlsRecordSeen": ("handshake",)}


def _every_error_class() -> list[type[KafkaError]]:
    for mod in pkgutil.walk_packages(kpax.__path__, "kpax."):
        if not mod.name.endswith("__main__"):
            importlib.import_module(mod.name)
    found: set[type[KafkaError]] = {KafkaError}
    todo = [KafkaError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found and not sub.__name__.startswith("UnknownError"):
                found.add(sub)
                todo.append(sub)
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


CLASSES = _every_error_class()


def test_the_walk_finds_generated_and_client_side_classes() -> None:
    names = {c.__name__ for c in CLASSES}
    assert {getattr(error_codes, n) for n in error_codes.__all__} <= set(CLASSES)
    assert {"ConfigError", "NoOffsetForPartitionError", "TlsRecordSeen"} <= names


def _make(cls: type[KafkaError], *message: str, **kw: object) -> KafkaError:
    args = ARGS.get(cls.__name__)
    if args is not None:
        return cls(*args)  # type: ignore[call-arg]
    return cls(*message, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_str_is_the_message_without_a_retriable_suffix(cls: type[KafkaError]) -> None:
    for retriable in (None, True, False):
        err = _make(cls, WHAT, retriable=retriable)
        text = str(err)
        assert not SUFFIX.search(text), text
        assert isinstance(err.retriable, bool)
        if cls.__name__ not in ARGS:
            assert text.count(WHAT) == 1, text
            if issubclass(cls, BrokerResponseError):
                assert text.startswith(f"{cls.name} [{cls.code}]: "), text
            else:
                assert text == WHAT


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_str_without_a_message_names_the_error(cls: type[KafkaError]) -> None:
    text = str(_make(cls))
    assert text.strip() and not SUFFIX.search(text)
    if issubclass(cls, BrokerResponseError):
        assert cls.name in text
    elif cls.__name__ not in ARGS:
        assert text == cls.__name__


def test_a_message_built_from_another_error_says_each_thing_once() -> None:
    """The Spark source's missing topic: a ConfigError made from a broker error."""
    inner = error_codes.UnknownTopicOrPartitionError(
        "describe topic 'nope' on broker 1 (127.0.0.1:9092)"
    )
    outer = ConfigError(f"option 'subscribe': topic 'nope': {inner}")
    text = str(outer)
    assert text == (
        "option 'subscribe': topic 'nope': UNKNOWN_TOPIC_OR_PARTITION [3]: "
        "describe topic 'nope' on broker 1 (127.0.0.1:9092)"
    )
    assert inner.retriable and not outer.retriable
