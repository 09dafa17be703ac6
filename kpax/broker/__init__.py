"""kpax.broker — one pipelined asyncio connection to one broker.

ApiVersions negotiation, correlation-id matching, many requests in flight,
TLS, SASL, per-request timeouts, reconnect with backoff.
Imports: kpax.proto and the standard library.
"""
