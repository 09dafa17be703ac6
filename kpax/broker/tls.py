"""Build the ``ssl.SSLContext`` for SSL and SASL_SSL connections.

Role: map the client's ssl_* options (CA file, client certificate and key,
key password, hostname check) to an SSLContext, or pass a user-built one
through. Errors in the files are :class:`ConfigError` naming the file.

Imports: kpax.proto.errors and the standard library.
"""

from __future__ import annotations

import ssl

from kpax.proto.errors import ConfigError


def build_ssl_context(
    *,
    cafile: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    check_hostname: bool = True,
    verify: bool = True,
    context: ssl.SSLContext | None = None,
) -> ssl.SSLContext:
    """An SSLContext for a Kafka client. ``verify=False`` turns certificate
    checks off entirely (test clusters only)."""
    if context is not None:
        return context
    try:
        ctx = ssl.create_default_context(purpose=ssl.Purpose.SERVER_AUTH, cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl_cafile {cafile!r} could not be loaded: {exc}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if certfile:
        try:
            ctx.load_cert_chain(certfile, keyfile, password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"ssl_certfile {certfile!r} / ssl_keyfile {keyfile!r} could not be loaded: {exc}"
            ) from None
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = check_hostname
    return ctx
