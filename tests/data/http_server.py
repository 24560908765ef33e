"""Test helper: a real HTTP server on 127.0.0.1, in a thread, serving in-memory files with Range support and faults."""

from __future__ import annotations

import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d+)-$")


class FileServer:
    """Serve `files` (name -> bytes) at `self.url`; record each request's (name, Range header).

    Faults: `drop_after[name] = n` cuts the next response for `name` after byte n of the file (once);
    `drops[name] = [n1, n2, ...]` cuts successive responses at those bytes, one per request;
    `stall_after[name] = (n, seconds)` sends up to byte n, then sends nothing for `seconds` (once);
    `statuses[name] = [503, ...]` answers successive requests with those HTTP errors first;
    `ignore_range = True` answers Range requests with the whole file (200), as some servers do.
    """

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.drop_after: dict[str, int] = {}
        self.drops: dict[str, list[int]] = {}
        self.stall_after: dict[str, tuple[int, float]] = {}
        self.statuses: dict[str, list[int]] = {}
        self.ignore_range = False
        self.requests: list[tuple[str, str | None]] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        # A short poll interval makes shutdown (each test's teardown) take milliseconds, not half a second.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/"

    def __enter__(self) -> FileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def _handler(server: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            name = self.path.lstrip("/")
            server.requests.append((name, self.headers.get("Range")))
            if name not in server.files:
                self.send_error(404)
                return
            if server.statuses.get(name):
                self.send_error(server.statuses[name].pop(0))
                return
            data = server.files[name]
            match = _RANGE.match(self.headers.get("Range") or "")
            start = int(match.group(1)) if match and not server.ignore_range else 0
            if start >= len(data) and start:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            stall = server.stall_after.pop(name, None)
            if stall is not None and stall[0] > start:
                self.wfile.write(data[start : stall[0]])
                self.wfile.flush()
                time.sleep(stall[1])  # the client's stall timeout fires first and it gives up on this response
                self.close_connection = True
                return
            cut = server.drop_after.pop(name, None)
            if cut is None and server.drops.get(name):
                cut = server.drops[name].pop(0)
            if cut is None or cut <= start:
                self.wfile.write(data[start:])
                return
            self.wfile.write(data[start:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    return Handler
