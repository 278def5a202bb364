"""Run a served app in this process, on a free loopback port (for tests, notebooks and
``scripts/gpu_check.py``; ``mimesis serve`` is the command-line server)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def serve_in_thread(app, start_timeout_s: float = 20.0) -> Iterator[str]:
    """Serve ``app`` (an ASGI app, e.g. :func:`mimesis.serve.app.create_app`) with uvicorn in a
    daemon thread on ``127.0.0.1:<free port>``; yields the base URL (``http://127.0.0.1:PORT``)
    and stops the server on exit.

    Raises:
        RuntimeError: the server did not start within ``start_timeout_s`` seconds.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the loopback server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
