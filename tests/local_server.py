"""A file server on 127.0.0.1 for the download tests (no network needed): it serves generated files, answers HEAD
requests with their length, and can break a transfer halfway (the announced Content-Length, then half the bytes and
a closed connection). Also: a medmnist-format file generated in memory, and a loopback port nothing listens on."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


class FileServer:
    """``with FileServer({"/dermamnist.npz": data}) as server: server.url("/dermamnist.npz")``; paths in
    ``truncated`` are cut off halfway. ``server.requests`` lists (method, path) as they came."""

    def __init__(self, files: dict[str, bytes], truncated: tuple[str, ...] = ()):
        self.files, self.truncated, self.requests = dict(files), set(truncated), []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _headers(self) -> bytes | None:
                server.requests.append((self.command, self.path))
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return None
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                return body

            def do_HEAD(self):  # noqa: N802 (the name http.server calls)
                self._headers()

            def do_GET(self):  # noqa: N802
                body = self._headers()
                if body is None:
                    return
                if self.path in server.truncated:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(body)

            def log_message(self, *args):  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def __enter__(self) -> FileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (a connection to it is refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def sources(**entries: tuple[str, str | None]) -> str:
    """The value of CALIBMED_FETCH_TEST_SOURCES: ``sources(**{"dermamnist.npz": (url, md5)})``."""
    return json.dumps({name: {"url": url, "md5": md5} for name, (url, md5) in entries.items()})


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def dermamnist_bytes(seed: int = 0, sizes: tuple[int, int, int] = (40, 10, 10)) -> bytes:
    """A small file in DermaMNIST's format (``{split}_images`` uint8 (N, 28, 28, 3), ``{split}_labels`` (N, 1), 7
    classes), generated: not DermaMNIST's images."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in zip(("train", "val", "test"), sizes):
        arrays[f"{split}_images"] = rng.integers(0, 256, (n, 28, 28, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(n) % 7).astype(np.uint8)[:, None]
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()
