"""A TCP proxy on loopback that can hold back what a server answers: a client's view of replies lost in a crash.

The client connects to the proxy, which connects to the server and copies
bytes both ways. :meth:`HoldingProxy.hold` passes on nothing more the server
sends, in any connection: the server has done what the client asked, and
the client has not heard. :meth:`drop` closes every connection, so what the
server sent is lost, as a server's crash does to its clients' connections; the proxy goes on accepting, and passes
bytes again, so that a client reconnects to the server started anew.

Nothing is parsed: the proxy stands between any client and any server of a
stream protocol (a Pulsar client and its broker, here).
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["HoldingProxy"]

_CHUNK = 65536


class _Connection:
    """One client connection and the proxy's connection to the server for it."""

    def __init__(self, proxy: HoldingProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server

    def start(self) -> None:
        threading.Thread(target=self._copy, args=(self.client, self.server, False), daemon=True).start()
        threading.Thread(target=self._copy, args=(self.server, self.client, True), daemon=True).start()

    def _copy(self, source: socket.socket, target: socket.socket, from_server: bool) -> None:
        try:
            while data := source.recv(_CHUNK):
                with self.proxy.lock:
                    if from_server and self.proxy.holding:
                        continue  # held back, and lost at drop()
                target.sendall(data)
        except OSError:
            pass  # a socket closed by the other direction or by drop()
        self.close()

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class HoldingProxy:
    """Accept on a loopback port (:attr:`port`) and forward to ``server_port`` on loopback (module docstring).

    Use it as a context manager: leaving it closes the listening socket and every connection.
    """

    def __init__(self, server_port: int, port: int = 0) -> None:
        self.server_port = server_port
        self.lock = threading.Lock()
        self.holding = False
        self._connections: list[_Connection] = []
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port: int = self._listener.getsockname()[1]
        self._accepting = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> HoldingProxy:
        self._accepting.start()
        return self

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(("127.0.0.1", self.server_port))
            except OSError:
                client.close()  # the server is down: the client sees a refused connection and tries again
                continue
            connection = _Connection(self, client, server)
            with self.lock:
                self._connections.append(connection)
            connection.start()

    def hold(self) -> None:
        """From now on pass on nothing the server sends; the client hears nothing more until :meth:`drop`."""
        with self.lock:
            self.holding = True

    def drop(self) -> None:
        """Close every connection; pass bytes again on the connections to come."""
        with self.lock:
            connections, self._connections = self._connections, []
            self.holding = False
        for connection in connections:
            connection.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self._listener.close()
        self.drop()

    def __enter__(self) -> HoldingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
