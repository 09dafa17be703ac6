"""A consume-transform-produce process for the transactional fault test.

Reads ``input`` in group ``group`` (read_committed), writes ``T:<value>`` to
``output`` and commits the consumed offsets in the same transaction. With
``--crash-after N`` it SIGKILLs itself in the middle of its N-th transaction
(outputs sent, nothing committed). It exits once it has caught up with the input.

Usage: python -m tests.faults.transformer BOOTSTRAP INPUT OUTPUT GROUP TXN_ID [--crash-after N]
"""

from __future__ import annotations

import argparse
import os
import signal

import kpax


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "transactional_id"):
        ap.add_argument(name)
    ap.add_argument("--crash-after", type=int, default=0)
    args = ap.parse_args()
    consumer = kpax.Consumer(
        args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_records=500,
    )
    producer = kpax.Producer(args.bootstrap, transactional_id=args.transactional_id)
    consumer.subscribe([args.input])
    producer.init_transactions()
    # A crashed predecessor stays in the group until its session times out.
    consumer.wait_for_assignment(timeout=60)
    transactions = 0
    while True:
        records = consumer.poll(timeout=1.0)
        if not records:
            assigned = consumer.assignment()
            ends = consumer.end_offsets(assigned)
            if assigned and all(consumer.position(tp) >= ends[tp] for tp in assigned):
                break  # caught up with everything committed to the input
            continue
        producer.begin_transaction()
        for r in records:
            producer.send(args.output, b"T:" + r.value, key=r.key)
        transactions += 1
        if transactions == args.crash_after:
            producer.flush()  # the outputs are in the log, the transaction is open
            os.kill(os.getpid(), signal.SIGKILL)
        offsets: dict[kpax.TopicPartition, int] = {}
        for r in records:
            offsets[kpax.TopicPartition(r.topic, r.partition)] = r.offset + 1
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction()
    print(f"transformer: {transactions} transactions committed", flush=True)
    producer.close()
    consumer.close()


if __name__ == "__main__":
    main()
