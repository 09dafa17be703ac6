"""Options as confluent-kafka's users write them: dotted names, string values
parsed as the Java client parses them, librdkafka's own names mapped, the rest
refused with what to do instead (not a wrong "did you mean")."""

from __future__ import annotations

import pytest

from kpax.config import resolve
from kpax.consumer.options import CONSUMER_OPTIONS
from kpax.errors import ConfigError
from kpax.producer.options import resolve_producer_config


def test_string_values_are_parsed_then_checked() -> None:
    cfg = resolve_producer_config(
        {"acks": "all", "linger.ms": "5", "enable.idempotence": "true", "retries": "3"}
    )
    assert (cfg["acks"], cfg["linger_ms"], cfg["enable_idempotence"], cfg["retries"]) == (
        -1,
        5,
        True,
        3,
    )
    consumer = resolve("consumer", CONSUMER_OPTIONS, {"enable.auto.commit": "False"})
    assert consumer["enable_auto_commit"] is False
    with pytest.raises(ConfigError, match=r"linger_ms='-1': must be an integer >= 0"):
        resolve_producer_config({"linger.ms": "-1"})
    with pytest.raises(ConfigError, match="enable_idempotence='yes'"):
        resolve_producer_config({"enable.idempotence": "yes"})


def test_librdkafka_names_map_to_kpax_options() -> None:
    cfg = resolve_producer_config(
        {
            "message.timeout.ms": "60000",
            "queue.buffering.max.kbytes": "2048",
            "compression.codec": "lz4",
            "ssl.ca.location": "/ca.pem",
            "sasl.username": "u",
        }
    )
    assert cfg["delivery_timeout_ms"] == 60000
    assert cfg["buffer_memory"] == 2048 * 1024
    assert cfg["compression_type"] == "lz4"
    assert cfg["ssl_cafile"] == "/ca.pem"
    assert cfg["sasl_plain_username"] == "u"
    consumer = resolve(
        "consumer",
        CONSUMER_OPTIONS,
        {"auto.offset.reset": "smallest", "fetch.wait.max.ms": "100", "error_cb": print},
    )
    assert consumer["auto_offset_reset"] == "earliest"
    assert consumer["fetch_max_wait_ms"] == 100
    assert consumer["error_callback"] is print


def test_names_without_an_equivalent_say_what_to_do() -> None:
    with pytest.raises(ConfigError, match="batch_size") as info:
        resolve_producer_config({"batch.num.messages": "100"})
    assert "did you mean" not in str(info.value)
    with pytest.raises(ConfigError, match=r"docs/logging\.md"):
        resolve_producer_config({"debug": "all"})
    with pytest.raises(ConfigError, match="which a consumer does not have"):
        resolve("consumer", CONSUMER_OPTIONS, {"message.timeout.ms": "1000"})
