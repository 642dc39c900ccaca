"""The HTTP/2 client's memory per closed stream is bounded (shoal.kube.client.H2_CLOSED_STREAMS)."""

from __future__ import annotations

from h2.config import H2Configuration
from h2.connection import H2Connection

from shoal.kube import client


def test_a_long_lived_h2_connection_forgets_old_closed_streams() -> None:
    assert client._have_h2()  # what KubeClient() calls before it opens a connection
    conn = H2Connection(H2Configuration(client_side=True))
    conn.initiate_connection()
    headers = [(":method", "GET"), (":path", "/api"), (":scheme", "https"), (":authority", "k8s")]
    streams = 3 * client.H2_CLOSED_STREAMS
    for stream_id in range(1, 2 * streams, 2):  # as many requests as the soak sends in minutes
        conn.send_headers(stream_id, headers, end_stream=True)
        conn.reset_stream(stream_id)
        _ = conn.open_outbound_streams  # h2 moves closed streams to its record here
    assert len(conn._closed_streams) == client.H2_CLOSED_STREAMS  # not 3x: the oldest are forgotten
