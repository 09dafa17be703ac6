"""kpax.admin — topics, partitions, configs, offsets, groups, ACLs, users.

Imports: kpax.cluster, kpax.broker, kpax.proto.
"""
