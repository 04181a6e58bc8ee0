"""The file layer: every byte the bookie writes or reads goes through a :class:`FileSystem`.

Two implementations: :class:`OsFileSystem` here (``os.pwrite``, ``os.fsync``,
a real ``fsync`` of directories), and the fault-injecting
:class:`~ledgerspec.reference.bookie.faults.FaultyFileSystem`, which wraps
it, counts every write, fsync and rename, can crash at any of them and can
throw away what a power loss would.

The interface is small on purpose: files are created (never silently
re-created), written at offsets, fsynced and closed through a handle;
names are made, renamed and removed through the file system; directories
are fsynced explicitly. Durability follows POSIX, and the bookie does not
rely on more than it promises:

- data written to a file is durable once the file is fsynced;
- a name (a created, renamed or removed directory entry) is durable once
  its directory is fsynced; fsyncing a file does not make its name durable;
- a write is not atomic: a crash may keep any prefix of the bytes written
  since the last fsync.
"""

from __future__ import annotations

import abc
import os

__all__ = ["FileHandle", "FileSystem", "OsFileSystem", "default_scratch"]


class FileHandle(abc.ABC):
    """An open file, read and written at explicit offsets."""

    path: str

    @abc.abstractmethod
    def write(self, offset: int, data: bytes | bytearray) -> None:
        """Write all of ``data`` at ``offset`` (to the OS: durable only after :meth:`fsync`)."""

    @abc.abstractmethod
    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer at the end of the file)."""

    @abc.abstractmethod
    def fsync(self) -> None:
        """Make the file's data durable."""

    @abc.abstractmethod
    def close(self) -> None: ...


class FileSystem(abc.ABC):
    """The operations the bookie uses; paths are absolute."""

    @abc.abstractmethod
    def create(self, path: str) -> FileHandle:
        """Create a new, empty file and open it; ``FileExistsError`` if the name exists."""

    @abc.abstractmethod
    def open(self, path: str) -> FileHandle:
        """Open an existing file for reading and writing."""

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes: ...

    @abc.abstractmethod
    def size(self, path: str) -> int: ...

    @abc.abstractmethod
    def exists(self, path: str) -> bool: ...

    @abc.abstractmethod
    def is_dir(self, path: str) -> bool: ...

    @abc.abstractmethod
    def list_dir(self, path: str) -> list[str]:
        """The names in a directory, sorted."""

    @abc.abstractmethod
    def make_dir(self, path: str) -> None:
        """Create one directory (its parent must exist)."""

    @abc.abstractmethod
    def rename(self, source: str, target: str) -> None:
        """Rename atomically, replacing ``target`` if it exists."""

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Remove a file's name (open handles keep working, as on POSIX)."""

    @abc.abstractmethod
    def fsync_dir(self, path: str) -> None:
        """Make the names in a directory durable."""

    # -- built on the operations above

    def make_dirs(self, path: str) -> None:
        """Create ``path`` and its missing parents, each made durable by fsyncing its parent."""
        if self.is_dir(path):
            return
        parent = os.path.dirname(path)
        self.make_dirs(parent)
        self.make_dir(path)
        self.fsync_dir(parent)

    def create_durably(self, path: str, content: bytes) -> FileHandle:
        """A new file holding ``content`` that appears whole or not at all, after a crash too.

        Written as ``<path>.tmp``, fsynced, renamed to ``path``, and the
        directory fsynced; the returned handle stays open for later writes.
        """
        temp = path + ".tmp"
        handle = self.create(temp)
        handle.write(0, content)
        handle.fsync()
        self.rename(temp, path)
        self.fsync_dir(os.path.dirname(path))
        handle.path = path
        return handle

    def replace_durably(self, path: str, content: bytes) -> None:
        """Replace a small file's content atomically: temp file, fsync, rename, fsync of the directory."""
        temp = path + ".tmp"
        if self.exists(temp):
            self.delete(temp)
        handle = self.create(temp)
        try:
            handle.write(0, content)
            handle.fsync()
        finally:
            handle.close()
        self.rename(temp, path)
        self.fsync_dir(os.path.dirname(path))


class _OsHandle(FileHandle):
    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd

    def write(self, offset: int, data: bytes | bytearray) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view, offset = view[written:], offset + written

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def fsync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class OsFileSystem(FileSystem):
    """The real file system: ``os.pwrite``, ``os.fsync`` of files and of directories."""

    def create(self, path: str) -> FileHandle:
        return _OsHandle(path, os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))

    def open(self, path: str) -> FileHandle:
        return _OsHandle(path, os.open(path, os.O_RDWR))

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def list_dir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def make_dir(self, path: str) -> None:
        os.mkdir(path)

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target)

    def delete(self, path: str) -> None:
        os.unlink(path)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def default_scratch() -> str | None:
    """Where scratch bookie directories go: ``/dev/shm`` when it is a writable directory (memory-backed on
    Linux), else None, the system's temporary directory. Runs that restart bookies thousands of times (the
    crash checks, the refinement tests) keep their files there."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
