"""The webhook's certificate files are reloaded before the first handshake after they change."""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

from shoal.kube.webhook.certs import CertFiles, write_self_signed


async def _peer_pem(port: int, ca: Path) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return ssl.DER_cert_to_PEM_cert(der)


def _pem(path: Path) -> str:
    return ssl.DER_cert_to_PEM_cert(ssl.PEM_cert_to_DER_cert(path.read_text()))


def test_first_connection_after_a_renewal_gets_the_new_certificate(tmp_path: Path) -> None:
    write_self_signed(tmp_path / "a", ["127.0.0.1"])
    certs = CertFiles(tmp_path / "a" / "tls.crt", tmp_path / "a" / "tls.key")
    first = _pem(certs.cert)

    async def main() -> tuple[str, str, str]:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=certs.context)
        port = server.sockets[0].getsockname()[1]
        try:
            before = await _peer_pem(port, certs.cert)
            write_self_signed(tmp_path / "a", ["127.0.0.1"])
            os.utime(certs.cert, (1, 1e10))  # a later mtime, even on a coarse clock
            after = await _peer_pem(port, certs.cert)
            # A broken pair (a half-written renewal) keeps the last good certificate.
            certs.key.write_text("not a key")
            os.utime(certs.key, (1, 2e10))
            kept = await _peer_pem(port, certs.cert)
            return before, after, kept
        finally:
            server.close()

    before, after, kept = asyncio.run(main())
    assert before == first and after == _pem(certs.cert) != first and kept == after
