"""kpax.cluster — who leads what: bootstrap, metadata cache, leaders, coordinators.

Imports: kpax.broker, kpax.proto.
"""
