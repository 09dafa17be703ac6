"""`make demo`: start a local Kafka, drive it with kpax, stop it.

Role: the main job until the `kpax` command exists: start a test Kafka with
kpax.testing, connect with kpax (ApiVersions negotiation, metadata), create a
topic with ``kpax.Admin``, write records with a raw Produce request built by
kpax.proto, read the offsets back, describe the cluster, delete the topic.

Imports: the standard library, kpax.testing and the kpax client.
"""

from __future__ import annotations

import asyncio
import sys
import time

from kpax.testing import KafkaStartError, start_kafka


async def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> int:
    import kpax.errors
    from kpax.broker import ConnectionOptions
    from kpax.cluster import Cluster
    from kpax.proto.messages import REQUESTS, ProduceRequest
    from kpax.proto.records import encode_columns

    cluster = Cluster(bootstrap.split(","), ConnectionOptions(client_id="kpax-demo"))
    try:
        await cluster.start()
        first = next(iter(cluster.brokers.values()))
        conn = await first.connection()
        print("kpax negotiated (API: broker range -> version used):")
        for key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 14, 18, 19, 22, 68):
            cls = REQUESTS.get(key)
            if cls is None or key not in conn.api_versions:
                continue
            lo, hi = conn.api_versions[key]
            print(f"  {cls.API_NAME:<24} v{lo}..v{hi} -> v{conn.pick_version(cls)}")
        now = int(time.time() * 1000)
        sent = 0
        for p in range(partitions):
            values = [b"demo record %d of partition %d" % (i, p) for i in range(per_partition)]
            batch = encode_columns(
                [now] * per_partition, [b"key-%d" % i for i in range(per_partition)], values
            )
            data = ProduceRequest.PartitionProduceData(index=p, records=batch)
            req = ProduceRequest(
                acks=-1,
                timeout_ms=10000,
                topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[data])],
            )
            for attempt in range(50):
                # A partition created a moment ago may not be led yet: retry retriable errors.
                broker, _ = await cluster.leader(topic, p)
                resp = await broker.request(req, max_version=12)
                code = resp.responses[0].partition_responses[0].error_code
                if not code:
                    break
                err = kpax.errors.error_for_code(code)
                if not err.retriable or attempt == 49:
                    raise err(f"produce to {topic}-{p} on {broker.describe()}")
                cluster.leader_is_down(topic, p)
                await asyncio.sleep(0.1)
            sent += per_partition
        return sent
    finally:
        await cluster.close()


def main() -> int:
    import kpax

    t0 = time.monotonic()
    try:
        cluster = start_kafka()
    except KafkaStartError as exc:
        print(f"demo: could not start Kafka: {exc}", file=sys.stderr)
        return 1
    with cluster:
        print(
            f"Kafka {cluster.version or '(existing)'} via {cluster.backend} backend "
            f"at {cluster.bootstrap}, up in {time.monotonic() - t0:.1f}s"
        )
        topic, partitions = f"kpax-demo-{int(time.time())}", 3
        with kpax.Admin(cluster.bootstrap) as admin:
            desc = admin.describe_cluster()
            print(
                f"cluster {desc.cluster_id}: {len(desc.brokers)} broker(s), "
                f"controller {desc.controller_id}"
            )
            admin.create_topics([kpax.NewTopic(topic, partitions, 1)]).raise_for_errors()
            print(f"created topic {topic} with {partitions} partitions")
            sent = asyncio.run(_produce(cluster.bootstrap, topic, partitions, 1000))
            print(f"produced {sent} records")
            tps = [kpax.TopicPartition(topic, p) for p in range(partitions)]
            latest = admin.list_offsets(dict.fromkeys(tps, "latest"))
            for tp in tps:
                print(f"  {tp}: latest offset {latest[tp].offset}")
            admin.delete_topics([topic]).raise_for_errors()
            print(f"deleted topic {topic}")
    print(f"demo: broker stopped, {time.monotonic() - t0:.1f}s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
