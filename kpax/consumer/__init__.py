"""kpax.consumer — fetcher, positions, group membership, assignors, offset commits.

Imports: kpax.cluster, kpax.broker, kpax.proto.
"""
