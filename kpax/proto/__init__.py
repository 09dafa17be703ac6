"""kpax.proto — the Kafka wire protocol, sans-I/O.

Bytes in, objects out: primitives (:mod:`.primitives`), request/response
headers (:mod:`.header`), every API message generated from Apache Kafka's JSON
specs (:mod:`.messages`), record formats (:mod:`.records`: RecordBatch v2 and
legacy MessageSet v0/v1), compression (:mod:`.compression`), CRC
(:mod:`.crc`) and error codes (:mod:`.errors`, :mod:`.error_codes`, and the
families of codes a client handles alike, :mod:`.error_families`).

Imports: the standard library and third-party codecs only; never another kpax
layer, never sockets, asyncio or clocks.
"""
