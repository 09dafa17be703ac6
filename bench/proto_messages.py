"""Micro-benchmark of the generated protocol messages (no broker, no peers).

Times the hot paths: a 6-partition Produce request encode and a 6-partition
Fetch response decode (1 MiB of records in total each, in the latest
versions), plus a 6-partition Metadata response decode, and prints ops/s.
Run: ``.venv/bin/python -m bench.proto_messages``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from kpax.proto.header import decode_response, encode_request
from kpax.proto.messages import FetchResponse, MetadataResponse, ProduceRequest

PARTITIONS = 6
RECORDS = bytes(1 << 20)  # 1 MiB split across the partitions
CHUNK = len(RECORDS) // PARTITIONS


def _rate(fn: Callable[[], object], seconds: float = 1.0) -> tuple[float, int]:
    fn()
    n = 0
    start = time.perf_counter()
    while True:
        for _ in range(50):
            fn()
        n += 50
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed, n


def main() -> None:
    view = memoryview(RECORDS)
    produce = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="orders",
                topic_id=uuid.uuid4(),
                partition_data=[
                    ProduceRequest.PartitionProduceData(
                        index=i, records=view[i * CHUNK : (i + 1) * CHUNK]
                    )
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )
    fetch = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic_id=uuid.uuid4(),
                partitions=[
                    FetchResponse.PartitionData(
                        partition_index=i,
                        high_watermark=1000,
                        last_stable_offset=1000,
                        log_start_offset=0,
                        records=view[i * CHUNK : (i + 1) * CHUNK],
                    )
                    for i in range(PARTITIONS)
                ],
            )
        ]
    )
    fetch_v = 17
    fetch_body = fetch.encode(fetch_v)
    fetch_frame = b"\x00\x00\x00\x01\x00" + fetch_body
    meta = MetadataResponse(
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=i, host=f"broker{i}", port=9092)
            for i in range(3)
        ],
        topics=[
            MetadataResponse.MetadataResponseTopic(
                name="orders",
                topic_id=uuid.uuid4(),
                partitions=[
                    MetadataResponse.MetadataResponsePartition(
                        partition_index=i,
                        leader_id=i % 3,
                        replica_nodes=[0, 1, 2],
                        isr_nodes=[0, 1, 2],
                    )
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )
    meta_v = 12
    meta_bytes = meta.encode(meta_v)

    cases: list[tuple[str, Callable[[], object]]] = [
        ("Produce v13 request encode (6 partitions, 1 MiB, body only)", lambda: produce.encode(13)),
        (
            "Produce v13 request encode_request (framed)",
            lambda: encode_request(produce, 13, 1, "kpax"),
        ),
        (
            "Fetch v17 response decode (6 partitions, 1 MiB)",
            lambda: FetchResponse.decode(fetch_body, fetch_v),
        ),
        ("Fetch v17 decode_response (framed)", lambda: decode_response(fetch_frame, 1, fetch_v)),
        (
            "Metadata v12 response decode (6 partitions)",
            lambda: MetadataResponse.decode(meta_bytes, meta_v),
        ),
        ("Metadata v12 response encode (6 partitions)", lambda: meta.encode(meta_v)),
    ]
    for name, fn in cases:
        rate, n = _rate(fn)
        print(f"{name:62s} {rate:12,.0f} ops/s  ({1e6 / rate:8.2f} us/op, {n} ops)")


if __name__ == "__main__":
    main()
