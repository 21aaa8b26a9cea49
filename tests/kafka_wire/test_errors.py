"""The error table against Kafka's codes and kafka-python's independent table."""

from __future__ import annotations

import inspect

import pytest

from kafka_wire.errors import ErrorCode, error_info, is_retriable


def test_codes_are_dense_from_minus_one_to_newest() -> None:
    codes = sorted(int(c) for c in ErrorCode)
    assert codes == list(range(-1, 134))


def test_names_unique_and_as_kafka() -> None:
    names = [c.name for c in ErrorCode]
    assert len(names) == len(set(names))
    assert ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT == 43
    assert ErrorCode.INVALID_RECORD == 87
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1


def test_retriable_flags_match_kafka() -> None:
    retriable = {c.name for c in ErrorCode if error_info(c).retriable}
    assert retriable == {
        "CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER",
        "REQUEST_TIMED_OUT", "REPLICA_NOT_AVAILABLE", "NETWORK_EXCEPTION", "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "NOT_CONTROLLER", "CONCURRENT_TRANSACTIONS", "KAFKA_STORAGE_ERROR", "FETCH_SESSION_ID_NOT_FOUND",
        "INVALID_FETCH_SESSION_EPOCH", "LISTENER_NOT_FOUND", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
        "OFFSET_NOT_AVAILABLE", "PREFERRED_LEADER_NOT_AVAILABLE", "ELIGIBLE_LEADERS_NOT_AVAILABLE",
        "ELECTION_NOT_NEEDED", "UNSTABLE_OFFSET_COMMIT", "THROTTLING_QUOTA_EXCEEDED", "UNKNOWN_TOPIC_ID",
        "INCONSISTENT_TOPIC_ID", "FETCH_SESSION_TOPIC_ID_ERROR", "SHARE_SESSION_NOT_FOUND",
        "INVALID_SHARE_SESSION_EPOCH", "SHARE_SESSION_LIMIT_REACHED",
    }
    assert not is_retriable(ErrorCode.NONE)
    assert is_retriable(6)


def test_info_fields() -> None:
    info = error_info(ErrorCode.UNSUPPORTED_VERSION)
    assert (info.code, info.name, info.retriable) == (35, "UNSUPPORTED_VERSION", False)
    assert "version" in info.message
    assert error_info(0).message == ""
    for c in ErrorCode:
        if c != ErrorCode.NONE:
            assert error_info(c).message.endswith(".")


def test_unknown_code_maps_to_unknown_server_error() -> None:
    info = error_info(9999)
    assert info.code == 9999 and info.name == "UNKNOWN_SERVER_ERROR" and not info.retriable


def test_cross_check_kafka_python_codes() -> None:
    errors = pytest.importorskip("kafka.errors")
    theirs: dict[int, bool] = {}
    for obj in vars(errors).values():
        if inspect.isclass(obj) and issubclass(obj, errors.BrokerResponseError):
            errno = getattr(obj, "errno", None)
            if errno is not None:
                theirs[errno] = obj.retriable
    ours = {int(c) for c in ErrorCode}
    assert set(theirs) <= ours
    # kafka-python marks CORRUPT_MESSAGE non-retriable; Kafka's CorruptRecordException is retriable.
    diffs = {code for code, r in theirs.items() if r != error_info(code).retriable}
    assert diffs <= {int(ErrorCode.CORRUPT_MESSAGE)}
