"""Admin operations on SCRAM users (``UserAdmin``): describe and alter SCRAM credentials.

Role: the mixin of :class:`~kpax.admin.client.AsyncAdmin` for SCRAM
credentials: describing asks any broker, altering goes to the controller; the
password is salted and hashed here, only the salted password travels.

Imports: kpax.admin.base, kpax.cluster.request_path,
kpax.admin.types, kpax.broker.broker, kpax.proto, kpax.structs,
the standard library.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from kpax.admin.base import AdminBase, Outcome, broker_error
from kpax.admin.types import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentials,
    UserScramCredentialUpsertion,
)
from kpax.broker.broker import Broker
from kpax.cluster.request_path import ANY_BROKER, CONTROLLER, Route
from kpax.proto.errors import KafkaError
from kpax.proto.messages import AlterUserScramCredentialsRequest as AlterScramRequest
from kpax.proto.messages import DescribeUserScramCredentialsRequest
from kpax.structs import BatchResult


class UserAdmin(AdminBase):
    """SCRAM credential calls: describe_user_scram_credentials,
    alter_user_scram_credentials."""

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> BatchResult[str, UserScramCredentials]:
        """The SCRAM mechanisms and iteration counts of each user (all users by default)."""
        names = list(users) if users is not None else None

        async def call(broker: Broker) -> BatchResult[str, UserScramCredentials]:
            resp = await broker.request(
                DescribeUserScramCredentialsRequest(
                    users=None
                    if names is None
                    else [DescribeUserScramCredentialsRequest.UserName(name=n) for n in names]
                )
            )
            if resp.error_code:
                raise broker_error(
                    resp.error_code, "describe SCRAM credentials", resp.error_message
                )
            values: dict[str, UserScramCredentials] = {}
            errors: dict[str, KafkaError] = {}
            for r in resp.results:
                if r.error_code:
                    errors[r.user] = broker_error(
                        r.error_code, f"describe SCRAM credentials of {r.user!r}", r.error_message
                    )
                else:
                    values[r.user] = UserScramCredentials(
                        r.user,
                        tuple(
                            ScramCredentialInfo(ScramMechanism(c.mechanism), c.iterations)
                            for c in r.credential_infos
                        ),
                    )
            return BatchResult(values, errors)

        return await self._on_route("describe SCRAM credentials", ANY_BROKER, call, timeout)

    async def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        *,
        timeout: float | None = None,
    ) -> BatchResult[str, None]:
        """Create, update or delete SCRAM credentials (the password is salted and
        hashed here; only the salted password travels)."""
        items = list(alterations)

        async def send(broker: Broker, users: list[str]) -> Outcome[str]:
            mine = [a for a in items if a.user in users]
            upserts = []
            for a in mine:
                if isinstance(a, UserScramCredentialUpsertion):
                    salt = a.salt or os.urandom(32)
                    hash_name = (
                        "sha256" if a.mechanism == ScramMechanism.SCRAM_SHA_256 else "sha512"
                    )
                    salted = hashlib.pbkdf2_hmac(hash_name, a.password.encode(), salt, a.iterations)
                    upserts.append(
                        AlterScramRequest.ScramCredentialUpsertion(
                            name=a.user,
                            mechanism=int(a.mechanism),
                            iterations=a.iterations,
                            salt=salt,
                            salted_password=salted,
                        )
                    )
            deletions = [
                AlterScramRequest.ScramCredentialDeletion(name=a.user, mechanism=int(a.mechanism))
                for a in mine
                if isinstance(a, UserScramCredentialDeletion)
            ]
            resp = await broker.request(AlterScramRequest(deletions=deletions, upsertions=upserts))
            return {
                r.user: (
                    broker_error(
                        r.error_code, f"alter SCRAM credentials of {r.user!r}", r.error_message
                    )
                    if r.error_code
                    else None
                )
                for r in resp.results
            }

        return await self._routed(
            "alter SCRAM credentials", [a.user for a in items], _controller, send, timeout
        )


def _controller(_user: str) -> Route:
    """SCRAM changes go to the controller (the request path's CONTROLLER route)."""
    return CONTROLLER
