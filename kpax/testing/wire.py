"""A few raw Kafka requests written with `struct`, for readiness probes and broker tests.

Role: prove a broker answers, independently of kpax's protocol layer: ApiVersions
(v0..v3), Metadata (v1, brokers only), SaslHandshake (v0/v1) and SaslAuthenticate
(v0) over a blocking socket, optionally TLS. Only the fields those tests need are
decoded.

Imports: the standard library only (never kpax.proto: this module must work
before and without the real protocol layer).
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass, field

__all__ = [
    "API_NAMES",
    "ApiVersionsResult",
    "BrokerConnection",
    "WireError",
    "api_versions",
]

METADATA = 3
API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36

#: Names of the API keys a summary prints (not exhaustive; unknown keys print as numbers).
API_NAMES: dict[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    47: "OffsetDelete",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    60: "DescribeCluster",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
}


class WireError(Exception):
    """A probe request failed: connection refused/closed, or a malformed answer."""


@dataclass
class ApiVersionsResult:
    """The decoded ApiVersions answer: error code and api_key -> (min, max) versions."""

    error_code: int
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)

    def summary(self) -> str:
        """One line per API key: name, min and max version."""
        lines = []
        for key in sorted(self.versions):
            lo, hi = self.versions[key]
            lines.append(f"{key:>4}  {API_NAMES.get(key, '?'):<30} v{lo}..v{hi}")
        return "\n".join(lines)


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    raw = s.encode()
    return _uvarint(len(raw) + 1) + raw


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise WireError(f"{self.what}: response truncated at byte {self.pos} (wanted {n})")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        v: int = struct.unpack(">h", self.take(2))[0]
        return v

    def i32(self) -> int:
        v: int = struct.unpack(">i", self.take(4))[0]
        return v

    def i64(self) -> int:
        v: int = struct.unpack(">q", self.take(8))[0]
        return v

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise WireError(f"{self.what}: varint too long")

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


class BrokerConnection:
    """A blocking connection to one broker listener, sending one request at a time."""

    def __init__(
        self,
        address: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 5.0,
        client_id: str = "kpax-testing",
    ) -> None:
        host, _, port = address.rpartition(":")
        self.address = address
        self.client_id = client_id
        self._correlation = 0
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        try:
            if ssl_context is not None:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, api_key: int, version: int, body: bytes, *, flexible: bool = False) -> bytes:
        """Send one request and return the response body (after the correlation id)."""
        self._correlation += 1
        header = struct.pack(">hhi", api_key, version, self._correlation) + _string(self.client_id)
        if flexible:
            header += b"\x00"  # request header v2: empty tagged fields
        payload = header + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv_exact(4))[0]
        data = self._recv_exact(size)
        (correlation,) = struct.unpack(">i", data[:4])
        if correlation != self._correlation:
            raise WireError(
                f"{self.address}: correlation id {correlation}, expected {self._correlation}"
            )
        return data[4:]

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise WireError(f"{self.address}: connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def api_versions(self, version: int = 3) -> ApiVersionsResult:
        """Send ApiVersions *version* (0..3) and decode the supported API version ranges."""
        if version >= 3:
            body = _compact_string("kpax-testing") + _compact_string("0.1") + b"\x00"
            data = self.request(API_VERSIONS, version, body, flexible=True)
        else:
            data = self.request(API_VERSIONS, version, b"")
        r = _Reader(data, f"ApiVersions v{version} from {self.address}")
        error = r.i16()
        result = ApiVersionsResult(error)
        if version >= 3 and error == 0:
            count = r.uvarint() - 1
            for _ in range(count):
                key, lo, hi = r.i16(), r.i16(), r.i16()
                r.skip_tags()
                result.versions[key] = (lo, hi)
        else:  # v0..v2, and the v0-shaped answer to an unsupported version
            for _ in range(r.i32()):
                key, lo, hi = r.i16(), r.i16(), r.i16()
                result.versions[key] = (lo, hi)
        return result

    def metadata_brokers(self) -> dict[int, str]:
        """Metadata v1 for no topics: the live (unfenced) brokers, node id -> "host:port"."""
        r = _Reader(
            self.request(METADATA, 1, struct.pack(">i", 0)), f"Metadata from {self.address}"
        )
        brokers = {}
        for _ in range(r.i32()):
            node_id, host, port = r.i32(), r.string(), r.i32()
            r.string()  # rack
            brokers[node_id] = f"{host}:{port}"
        return brokers

    def sasl_handshake(self, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
        """SaslHandshake: return (error_code, mechanisms the broker enables)."""
        r = _Reader(
            self.request(SASL_HANDSHAKE, version, _string(mechanism)),
            f"SaslHandshake from {self.address}",
        )
        error = r.i16()
        mechanisms = [r.string() or "" for _ in range(r.i32())]
        return error, mechanisms

    def sasl_authenticate(self, auth_bytes: bytes) -> tuple[int, str | None, bytes]:
        """SaslAuthenticate v0: return (error_code, error_message, server auth bytes)."""
        body = struct.pack(">i", len(auth_bytes)) + auth_bytes
        r = _Reader(
            self.request(SASL_AUTHENTICATE, 0, body), f"SaslAuthenticate from {self.address}"
        )
        error = r.i16()
        message = r.string()
        return error, message, r.bytes_() or b""


def api_versions(
    address: str,
    *,
    ssl_context: ssl.SSLContext | None = None,
    timeout: float = 5.0,
    version: int = 3,
) -> ApiVersionsResult:
    """Connect to *address* ("host:port"), send ApiVersions and return the decoded answer.

    Raises OSError when nothing listens, WireError on a malformed answer.
    """
    with BrokerConnection(address, ssl_context=ssl_context, timeout=timeout) as conn:
        return conn.api_versions(version)
