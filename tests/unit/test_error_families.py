"""Broker error families (kpax.proto.error_families), and the rule that client code
outside kpax/proto never names a Kafka error by its number."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kpax.proto import error_codes, error_families
from kpax.proto.error_families import (
    CLASSIC_MEMBER_FENCED_ERRORS,
    CONSUMER_MEMBER_FENCED_ERRORS,
    COORDINATOR_ERRORS,
    EPOCH_VALIDATION_ERRORS,
    FETCH_SESSION_ERRORS,
    LEADER_CHANGED_ERRORS,
    LEADER_OR_TOPIC_ERRORS,
    PRODUCER_FENCED_ERRORS,
    SEQUENCE_ERRORS,
    STALE_GENERATION_ERRORS,
    STALE_METADATA_ERRORS,
    TXN_FATAL_ERRORS,
    TXN_RETRY_ERRORS,
    UNKNOWN_TOPIC_ERRORS,
    ErrorFamily,
    code_in,
    code_of,
)
from kpax.proto.errors import BrokerResponseError, error_for_code

# ---------------------------------------------------------------- the families

#: Each family's codes, as the client layers matched them by number before.
FAMILY_CODES: dict[str, set[int]] = {
    "COORDINATOR_ERRORS": {14, 15, 16},
    "LEADER_CHANGED_ERRORS": {5, 6, 74, 75},
    "UNKNOWN_TOPIC_ERRORS": {3, 100},
    "REPLICA_NOT_READY_ERRORS": {9, 78},
    # producer (producer/sender.py _LEADER_ERRORS)
    "LEADER_OR_TOPIC_ERRORS": {3, 5, 6, 74, 75, 100},
    # consumer fetch and offset lookups (consumer/fetcher.py, consumer/offsets.py)
    "STALE_METADATA_ERRORS": {3, 5, 6, 9, 56, 74, 75, 78, 100, 103},
    "EPOCH_VALIDATION_ERRORS": {6, 74, 75},
    "FETCH_SESSION_ERRORS": {70, 71},
    "SHARE_SESSION_ERRORS": {122, 123, 133},
    "CLASSIC_MEMBER_FENCED_ERRORS": {22, 25},
    "CONSUMER_MEMBER_FENCED_ERRORS": {25, 110},
    "STALE_GENERATION_ERRORS": {22, 25, 27, 110, 113},
    "SEQUENCE_ERRORS": {45, 47, 59},
    "PRODUCER_FENCED_ERRORS": {47, 90},
    "TXN_FATAL_ERRORS": {47, 48, 53, 90},
    "TXN_RETRY_ERRORS": {51, 55},
}


_GENERATED: list[type[BrokerResponseError]] = [getattr(error_codes, n) for n in error_codes.__all__]


def _codes(family: ErrorFamily) -> set[int]:
    return {code_of(cls) for cls in family}


def test_every_family_is_tested() -> None:
    families = {n for n in error_families.__all__ if n.endswith("_ERRORS")}
    assert families == set(FAMILY_CODES)


@pytest.mark.parametrize("name", sorted(FAMILY_CODES))
def test_family_codes(name: str) -> None:
    family: ErrorFamily = getattr(error_families, name)
    assert isinstance(family, tuple)
    assert len(set(family)) == len(family), "a class listed twice"
    for cls in family:
        assert issubclass(cls, BrokerResponseError)
        assert getattr(error_codes, cls.__name__) is cls  # a generated class
        assert error_for_code(code_of(cls)) is cls
    assert _codes(family) == FAMILY_CODES[name]
    # The three ways client code uses a family.
    assert not code_in(0, family)
    for cls in _GENERATED:
        inside = code_of(cls) in FAMILY_CODES[name]
        assert code_in(code_of(cls), family) is inside
        assert issubclass(cls, family) is inside
        assert isinstance(cls("x"), family) is inside


def test_family_members_by_name() -> None:
    assert list(COORDINATOR_ERRORS) == [
        error_codes.CoordinatorLoadInProgressError,
        error_codes.CoordinatorNotAvailableError,
        error_codes.NotCoordinatorError,
    ]
    assert list(PRODUCER_FENCED_ERRORS) == [
        error_codes.InvalidProducerEpochError,
        error_codes.ProducerFencedError,
    ]
    assert error_codes.InvalidTxnStateError in TXN_FATAL_ERRORS
    assert error_codes.FencedMemberEpochError in CONSUMER_MEMBER_FENCED_ERRORS
    assert error_codes.DuplicateSequenceNumberError not in SEQUENCE_ERRORS


def test_families_nest() -> None:
    """The leader families are built from the small ones; subsets hold."""
    assert set(LEADER_OR_TOPIC_ERRORS) == set(LEADER_CHANGED_ERRORS + UNKNOWN_TOPIC_ERRORS)
    assert set(LEADER_OR_TOPIC_ERRORS) < set(STALE_METADATA_ERRORS)
    assert set(EPOCH_VALIDATION_ERRORS) < set(STALE_METADATA_ERRORS)
    assert set(CLASSIC_MEMBER_FENCED_ERRORS) < set(STALE_GENERATION_ERRORS)
    assert set(CONSUMER_MEMBER_FENCED_ERRORS) < set(STALE_GENERATION_ERRORS)
    assert set(PRODUCER_FENCED_ERRORS) < set(TXN_FATAL_ERRORS)
    assert not set(COORDINATOR_ERRORS) & set(STALE_METADATA_ERRORS)
    assert not set(FETCH_SESSION_ERRORS) & set(STALE_METADATA_ERRORS)
    assert not set(TXN_RETRY_ERRORS) & set(TXN_FATAL_ERRORS)


def test_code_in_and_code_of() -> None:
    assert not code_in(0, COORDINATOR_ERRORS)  # NONE is in no family
    assert code_in(16, error_codes.NotCoordinatorError)  # one class works too
    assert not code_in(15, error_codes.NotCoordinatorError)
    assert not code_in(9999, COORDINATOR_ERRORS)  # an unknown code
    assert code_of(error_codes.LeaderNotAvailableError) == 5
    assert code_of(error_codes.UnknownServerError) == -1


def test_except_clause() -> None:
    with pytest.raises(error_codes.NotCoordinatorError):
        try:
            raise error_for_code(16)("x")
        except LEADER_CHANGED_ERRORS:
            pytest.fail("not a leader error")
        except COORDINATOR_ERRORS:
            raise


# ---------------------------------------------------------------- no numbers in client code

ROOT = Path(__file__).resolve().parents[2]
KPAX = ROOT / "kpax"

#: Files allowed to match Kafka errors by number (none: every client file matches by class).
ALLOWED: set[str] = set()

_CONSTANT = re.compile(r"^_*[A-Z][A-Z0-9_]*$")
_FAMILY_NAME = re.compile(r"_(ERRORS|CODES)$")
#: Kafka error names (NOT_LEADER_OR_FOLLOWER, ...): a constant named like one, or
#: like its first two or more words (_NOT_LEADER, _UNKNOWN_TOPIC), is an error code.
_KAFKA_NAMES = {cls.name for cls in _GENERATED}
_KAFKA_PREFIXES = {
    "_".join(n.split("_")[:k]) for n in _KAFKA_NAMES for k in range(2, n.count("_") + 2)
}


def _ident(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _int_literal(node: ast.AST) -> bool:
    """A nonzero int literal (0 is NONE, success: not an error code)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value != 0


def _is_code_like(node: ast.AST) -> bool:
    name = _ident(node)
    return name is not None and "code" in name.lower() and "returncode" not in name.lower()


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.numeric: set[str] = set()  # constants holding (collections of) ints
        self.found: list[tuple[int, str]] = []
        self.in_class = 0  # enum members (ResourceType.TRANSACTIONAL_ID = 5) are no codes

    def numberish(self, node: ast.AST) -> bool:
        """An int literal, a constant holding ints, or a collection of such."""
        if _int_literal(node):
            return True
        if isinstance(node, ast.Name) and node.id in self.numeric:
            return True
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(self.numberish(e) for e in node.elts)
        if (
            isinstance(node, ast.Call)
            and _ident(node.func) in {"frozenset", "set", "tuple"}
            and node.args
        ):
            return self.numberish(node.args[0])
        return False

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.in_class += 1
        self.generic_visit(node)
        self.in_class -= 1

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assigned(target, node.value, node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assigned(node.target, node.value, node.lineno)
        self.generic_visit(node)

    def _assigned(self, target: ast.AST, value: ast.AST, line: int) -> None:
        if not (isinstance(target, ast.Name) and _CONSTANT.match(target.id)):
            return
        if not self.numberish(value):
            return
        self.numeric.add(target.id)
        bare = target.id.lstrip("_")
        named_like_error = bare in _KAFKA_NAMES or bare in _KAFKA_PREFIXES
        if _FAMILY_NAME.search(bare) or (named_like_error and not self.in_class):
            self.found.append((line, f"{target.id}: error code(s) by number"))

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            left, right = operands[i], operands[i + 1]
            if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                continue
            for a, b in ((left, right), (right, left)):
                if _is_code_like(a) and self.numberish(b):
                    self.found.append((node.lineno, "an error code compared with a number"))
                    break
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _ident(node.func) or ""
        if (
            name.lstrip("_")[:1].islower()
            and ("error" in name.lower() or "code" in name.lower())
            and node.args
            and self.numberish(node.args[0])
        ):
            self.found.append((node.lineno, f"{name}(<number>)"))
        receiver = _ident(node.func.value) if isinstance(node.func, ast.Attribute) else None
        if (
            name == "get"
            and receiver is not None
            and ("error" in receiver.lower() or "code" in receiver.lower())
            and len(node.args) > 1
            and self.numberish(node.args[1])
        ):
            self.found.append((node.lineno, f"{receiver}.get(..., <number>)"))
        for kw in node.keywords:
            if kw.arg is not None and _is_code_like(ast.Name(kw.arg)) and self.numberish(kw.value):
                self.found.append((node.lineno, f"{kw.arg}=<number>"))
        self.generic_visit(node)


def numeric_error_codes(source: str) -> list[tuple[int, str]]:
    """(line, what) of each place ``source`` names a Kafka error by its number."""
    scanner = _Scanner()
    scanner.visit(ast.parse(source))
    return sorted(scanner.found)


@pytest.mark.parametrize(
    "source",
    [
        "_COORDINATOR_ERRORS = {14, 15, 16}",
        "LEADER_ERRORS = frozenset({3, 5, 6})",
        "_SESSION_ERRORS = (70, 71)",
        "_NOT_LEADER = 6",
        "_UNKNOWN_TOPIC = 3",
        "_DUPLICATE_SEQUENCE = 46",
        "_FENCED = frozenset({25, 110})\nif code in _FENCED: pass",
        "_A = 5\n_B = {_A, 6}\nif p.error_code in _B: pass",
        "if code == 6: pass",
        "if exc.code == 3: pass",
        "if t.error_code != 5: pass",
        "if error.code in (47, 90): pass",
        "if code in _X or code == 6: pass",
        "raise error_for_code(90)('x')",
        "raise error_for_code(-1)('x')",
        "x = _error(6, 'ctx')",
        "P(error_code=5)",
        "_UNKNOWN = 3\ncode = snap.topic_errors.get(name, _UNKNOWN)",
    ],
)
def test_scanner_flags(source: str) -> None:
    assert numeric_error_codes(source), source


@pytest.mark.parametrize(
    "source",
    [
        "if code: pass",
        "if code == 0: pass",
        "if resp.error_code != 0: pass",
        "if proc.returncode != 1: pass",
        "if isinstance(exc, COORDINATOR_ERRORS): pass",
        "if code_in(code, COORDINATOR_ERRORS): pass",
        "EARLIEST = -2\nLATEST = -1\nx = {tp: EARLIEST}",
        "GROUP = 0\nTRANSACTION = 1\nif key_type == GROUP: pass",
        "_ROW_SLOTS = (2, 3, 5, 6, 7)",
        "if version >= 8: pass",
        "if n == 3: pass",
        "log.error('x %d', 5)",
        "n = config.get('retries', 5)",
        "raise error_for_code(code)('x')",
        "EXIT_ERROR = 1",
        "class ResourceType(enum.IntEnum):\n    TRANSACTIONAL_ID = 5",
    ],
)
def test_scanner_passes(source: str) -> None:
    assert not numeric_error_codes(source), source


def _client_files() -> list[Path]:
    return sorted(p for p in KPAX.rglob("*.py") if p.relative_to(KPAX).parts[0] != "proto")


def test_no_numeric_error_codes_outside_proto() -> None:
    problems = []
    for path in _client_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED:
            continue
        for line, what in numeric_error_codes(path.read_text(encoding="utf-8")):
            problems.append(f"{rel}:{line}: {what}")
    assert not problems, (
        "match broker errors by class (kpax.proto.error_families, kpax.proto.error_codes), "
        "not by number:\n" + "\n".join(problems)
    )


def test_allowed_files_exist() -> None:
    for rel in ALLOWED:
        assert (ROOT / rel).is_file(), f"{rel} is gone: drop it from ALLOWED"


def test_one_table_says_what_each_error_makes_stale() -> None:
    from kpax.proto import error_codes as ec
    from kpax.proto.error_families import Stale, stale_after
    from kpax.proto.errors import KafkaConnectionError, KafkaTimeoutError

    assert stale_after(ec.NotCoordinatorError) is Stale.COORDINATOR
    assert stale_after(ec.CoordinatorLoadInProgressError("x")) is Stale.COORDINATOR
    for leader in (
        ec.NotLeaderOrFollowerError,
        ec.LeaderNotAvailableError,
        ec.FencedLeaderEpochError,
        ec.UnknownTopicOrPartitionError,
        ec.KafkaStorageError,
        ec.InconsistentTopicIdError,
    ):
        assert stale_after(leader) is Stale.LEADER, leader
    assert stale_after(ec.FetchSessionIdNotFoundError) is Stale.FETCH_SESSION
    assert stale_after(ec.ShareSessionNotFoundError) is Stale.SHARE_SESSION
    assert stale_after(KafkaConnectionError("cut")) is Stale.CONNECTION
    assert stale_after(KafkaTimeoutError("slow")) is Stale.CONNECTION
    assert stale_after(ec.MessageTooLargeError) is Stale.NOTHING
    assert stale_after(ValueError("not kafka")) is Stale.NOTHING
