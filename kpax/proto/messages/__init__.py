"""Every Kafka API message, generated from Apache Kafka's JSON specs.

Role: the public face of :mod:`kpax.proto.messages._generated` (written by
``tools/gen_proto.py``; see docs/protocol.md). Import message classes from
here: ``from kpax.proto.messages import MetadataRequest, FetchResponse``.
``REQUESTS``/``RESPONSES`` map an api key to its classes.

Imports: kpax.proto only.
"""

from kpax.proto.messages._generated import *  # noqa: F403
from kpax.proto.messages._generated import KAFKA_SPECS_VERSION as KAFKA_SPECS_VERSION
from kpax.proto.messages._generated import REQUESTS as REQUESTS
from kpax.proto.messages._generated import RESPONSES as RESPONSES
from kpax.proto.messages._generated import __all__ as __all__
