"""A bookie's registration in ZooKeeper, as BookKeeper 4.17.2's bookie makes it, so that clients find it.

What a BookKeeper client reads, under the ledgers root (``/ledgers``):

- ``available/<bookie id>``: an ephemeral znode of the bookie's ZooKeeper
  session, holding a ``BookieServiceInfoFormat`` with one endpoint, protocol
  ``bookie-rpc``, at the bookie's host and port (``ZKRegistrationManager.registerBookie``
  and ``serializeBookieServiceInfo``; the endpoint as ``BookieService.publishInfo``
  makes it). The client's ``DefaultBookieAddressResolver.resolve`` connects
  to that endpoint; its ``BookieWatcher`` picks ensembles among these znodes.
  A read-only bookie registers under ``available/readonly/`` instead, which
  the reference bookies never do;
- ``cookies/<bookie id>``: the bookie's cookie, a persistent znode written
  once, before the first registration (``Cookie.writeToRegistrationManager``,
  ``ZKRegistrationManager.writeCookie``): layout version 5, then the
  ``CookieFormat`` in protobuf's text format (``Cookie.toString``). No client
  reads it; a bookie that starts again checks it.

The cluster must have been formatted (``BookKeeperAdmin.initNewCluster``):
a missing ``available`` znode is an error naming it, as for BookKeeper's
bookie, which does not create it.
"""

from __future__ import annotations

import logging

from google.protobuf import text_format
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
from ledgerspec.reference.metadata.protos import DataFormats_pb2 as formats

__all__ = ["COOKIE_LAYOUT_VERSION", "BookieRegistration", "RegistrationError", "cookie", "service_info"]

#: ``Cookie.CURRENT_COOKIE_LAYOUT_VERSION``.
COOKIE_LAYOUT_VERSION = 5
_CONNECT_TIMEOUT = 30.0


class RegistrationError(Exception):
    """The bookie cannot register: ZooKeeper is not there, or the cluster is not formatted."""


def service_info(host: str, port: int) -> bytes:
    """The data of its ``available/`` znode: its one ``bookie-rpc`` endpoint (``BookieService.publishInfo``)."""
    info = formats.BookieServiceInfoFormat()
    info.endpoints.add(id="bookie", port=port, host=host, protocol="bookie-rpc")
    return info.SerializeToString()


def _dirs(*paths: str) -> str:
    """``Cookie.encodeDirPaths``: the count, then each path, tab-separated."""
    return "\t".join([str(len(paths)), *paths])


def cookie(bookie_id: str, journal_dir: str, ledger_dirs: tuple[str, ...], instance_id: str | None) -> bytes:
    """The bookie's cookie as ``Cookie.toString`` writes it (layout version 5, then the text format)."""
    message = formats.CookieFormat(bookieHost=bookie_id, journalDir=_dirs(journal_dir), ledgerDirs=_dirs(*ledger_dirs))
    if instance_id is not None:
        message.instanceId = instance_id
    return f"{COOKIE_LAYOUT_VERSION}\n{text_format.MessageToString(message)}".encode()


def connect(hosts: str) -> KazooClient:
    """A started ZooKeeper session; :class:`RegistrationError` when ZooKeeper cannot be reached."""
    quiet = logging.getLogger("ledgerspec.wire.kazoo")
    quiet.setLevel(logging.ERROR)
    zk = KazooClient(hosts=hosts, timeout=10, logger=quiet)
    try:
        zk.start(timeout=_CONNECT_TIMEOUT)
    except Exception as exc:
        zk.close()
        raise RegistrationError(f"cannot reach ZooKeeper at {hosts}: {exc}") from exc
    return zk


class BookieRegistration:
    """One bookie's ZooKeeper session and what it registers there; closing it ends the session and the znode."""

    def __init__(self, hosts: str, ledgers_root: str = "/ledgers") -> None:
        self.ledgers_root = ledgers_root.rstrip("/")
        self._zk = connect(hosts)
        self.hosts = hosts

    def register(self, bookie_id: str, host: str, port: int, journal_dir: str, ledger_dirs: tuple[str, ...]) -> str:
        """Write the cookie if there is none, then the ephemeral ``available/<bookie_id>``; that znode's path."""
        available = f"{self.ledgers_root}/available"
        if self._zk.exists(available) is None:
            raise RegistrationError(
                f"{available} does not exist in ZooKeeper at {self.hosts}: format the cluster first "
                "(BookKeeperAdmin.initNewCluster, `bookkeeper shell initnewcluster`)"
            )
        cookie_path = f"{self.ledgers_root}/cookies/{bookie_id}"
        if self._zk.exists(cookie_path) is None:
            instance = f"{self.ledgers_root}/INSTANCEID"
            instance_id = self._zk.get(instance)[0].decode() if self._zk.exists(instance) is not None else None
            self._zk.create(cookie_path, cookie(bookie_id, journal_dir, ledger_dirs, instance_id), makepath=True)
        path = f"{available}/{bookie_id}"
        try:
            self._zk.create(path, service_info(host, port), ephemeral=True)
        except NodeExistsError:
            # ZKRegistrationManager.checkRegNodeAndWaitExpired waits for another session's znode to expire.
            raise RegistrationError(f"{path} is held by another ZooKeeper session: is the bookie running?") from None
        return path

    def set_read_only(self, bookie_id: str, host: str, port: int, read_only: bool) -> str:
        """Move the bookie's registration to ``available/readonly/<bookie_id>`` or back, as a bookie that turns
        read-only (or writable again) does (``ZKRegistrationManager.registerBookie``); the new znode's path."""
        available = f"{self.ledgers_root}/available"
        writable, readonly = f"{available}/{bookie_id}", f"{available}/readonly/{bookie_id}"
        new, old = (readonly, writable) if read_only else (writable, readonly)
        if self._zk.exists(new) is None:
            self._zk.create(new, service_info(host, port), ephemeral=True, makepath=True)
        if self._zk.exists(old) is not None:
            self._zk.delete(old)
        return new

    def close(self) -> None:
        """End the session: ZooKeeper removes the bookie's ephemeral znode, and clients see it leave."""
        self._zk.stop()
        self._zk.close()
