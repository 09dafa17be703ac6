"""kpax.producer — partitioner, accumulator, sender, idempotence and transactions.

Imports: kpax.cluster, kpax.broker, kpax.proto.
"""
