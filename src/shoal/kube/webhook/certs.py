"""Serving certificates for the webhook: self-signed (with the `cryptography` package) or files.

`self_signed(hosts)` returns a certificate that is its own CA (give it to the API server as the
webhook's `caBundle`) and its key, both PEM. `CertFiles` loads a certificate and key into an
`ssl.SSLContext` and reloads them when the files change (a rotation by the chart, cert-manager or
`--self-signed-dir`), without a restart: new connections get the new certificate.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import ssl
from dataclasses import dataclass, field
from pathlib import Path


def self_signed(hosts: list[str], days: int = 365) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for `hosts` (DNS names or IP addresses), valid `days` days."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "shoal-webhook")])
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def write_self_signed(directory: Path, hosts: list[str], days: int = 365) -> Path:
    """Write `tls.crt` / `tls.key` (key mode 0600) into `directory`; returns the certificate's path."""
    cert, key = self_signed(hosts, days)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.key").touch(mode=0o600)
    (directory / "tls.key").write_bytes(key)
    (directory / "tls.crt").write_bytes(cert)
    return directory / "tls.crt"


def _server_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


@dataclass(slots=True)
class CertFiles:
    """`context` is the listening context. Each handshake checks the files first (its SNI callback, which
    runs for every ClientHello, with or without a server name) and, when they changed, moves the
    connection to a context loaded from the new files: the very first connection after a renewal
    already gets the new certificate."""

    cert: Path
    key: Path
    context: ssl.SSLContext = field(default_factory=_server_context)
    _live: ssl.SSLContext | None = None
    _stamp: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        self.reload_if_changed()
        self.context.load_cert_chain(str(self.cert), str(self.key))
        self.context.sni_callback = self._on_hello

    def _on_hello(self, conn: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: ssl.SSLContext) -> None:
        with contextlib.suppress(OSError, ssl.SSLError):  # a half-written pair: keep the last good one
            self.reload_if_changed()
        if self._live is not None:
            conn.context = self._live

    def reload_if_changed(self) -> bool:
        """Load the pair again when either file changed since the last load; True if it did."""
        stamp = (self.cert.stat().st_mtime, self.key.stat().st_mtime)
        if stamp == self._stamp:
            return False
        live = _server_context()
        live.load_cert_chain(str(self.cert), str(self.key))
        self._live, self._stamp = live, stamp
        return True
