"""A file system that crashes on demand and loses what a power loss would lose.

:class:`FaultyFileSystem` wraps the real one: the files are real files under
a root directory, written with ``os.pwrite`` as usual. Beside them it keeps a
model of what is *durable*, by the rules stated in :mod:`.files`:

- each file has durable bytes (as of its last fsync) and the writes made
  since, in order;
- each directory has its current names and its durable names (as of its
  last fsync); a file or directory whose name is not durable is lost with
  everything under it.

Every operation that changes something (create, write, fsync, fsync of a
directory, rename, delete, mkdir) is a numbered *boundary*, recorded in
:attr:`FaultyFileSystem.events`. With ``crash_at=N`` the file system raises
:class:`SimulatedCrash` instead of performing boundary ``N`` and at every
call after it: the process is dead. Then

- :meth:`FaultyFileSystem.power_loss` rewrites the real files to their
  durable content: fsynced bytes only, names only if their directory was
  fsynced. ``torn={path: n}`` keeps the first ``n`` bytes of the unsynced
  writes to ``path`` (in the order they were made, the last one cut short):
  a torn tail. Unsynced writes survive only as such a prefix; the model
  does not reorder writes within a file, nor apply a later write without
  the earlier ones;
- :meth:`FaultyFileSystem.restart_process` models a process crash without a
  power loss: the OS keeps everything written, nothing becomes durable.

Either one brings the file system back to life; handles opened before it
are dead. Files that exist under the root when the file system is made are
taken as durable.

With ``sync_to_disk=False`` the fsyncs are counted, modelled and not passed
to the disk: the model, not the disk, decides what a simulated crash keeps,
so a crash sweep that runs a scenario hundreds of times need not wait for
the disk each time.

Without changing anything, :meth:`FaultyFileSystem.durable_view` shows what a
power loss now would leave (with torn prefixes too) and
:meth:`FaultyFileSystem.written_view` what the OS holds, each as a read-only
:class:`TreeSnapshot`: the readers of :mod:`.disk` read either one. So that one
crash can be continued in several ways, a snapshot can be written out as a
directory of its own (what a power loss left), and
:meth:`FaultyFileSystem.copy_to` continues a process crash elsewhere, with
what is durable and what is not.
"""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Callable, Mapping

import attrs
from ledgerspec.reference.bookie.files import FileHandle, FileSystem, OsFileSystem

__all__ = ["FaultyFileSystem", "FsEvent", "SimulatedCrash", "TreeSnapshot"]


class SimulatedCrash(BaseException):
    """The process stopped at a file-system boundary. A BaseException, so no ``except Exception`` swallows it."""


@attrs.frozen
class FsEvent:
    """One boundary: an operation that changed the file system."""

    index: int  # boundaries are numbered from 0
    op: str  # create, write, fsync, fsync_dir, rename, delete, make_dir
    path: str
    detail: str = ""  # offset and size of a write, target of a rename

    def __str__(self) -> str:
        return f"#{self.index} {self.op} {self.path}" + (f" {self.detail}" if self.detail else "")


class _File:
    def __init__(self, durable: bytes) -> None:
        self.durable = durable  # content as of the last fsync
        self.unsynced: list[tuple[int, bytes]] = []  # writes since, in order

    def content(self, keep: int | None) -> bytes:
        """Durable bytes plus the first ``keep`` bytes of unsynced writes (all of them if ``None``)."""
        data = bytearray(self.durable)
        for offset, chunk in self.unsynced:
            if keep is not None:
                if keep <= 0:
                    break
                chunk, keep = chunk[:keep], keep - len(chunk)
            if offset > len(data):
                data.extend(bytes(offset - len(data)))
            data[offset : offset + len(chunk)] = chunk
        return bytes(data)


class _Dir:
    def __init__(self) -> None:
        self.names: dict[str, _File | _Dir] = {}  # current entries
        self.durable: dict[str, _File | _Dir] = {}  # entries as of the last fsync of this directory


class _FaultyHandle(FileHandle):
    def __init__(self, fs: FaultyFileSystem, inner: FileHandle, node: _File) -> None:
        self.path = inner.path
        self._fs = fs
        self._inner = inner
        self._node = node
        self._generation = fs._generation

    def write(self, offset: int, data: bytes | bytearray) -> None:
        self._check()
        self._fs._boundary("write", self.path, f"{len(data)} bytes at {offset}")
        self._inner.write(offset, data)
        self._node.unsynced.append((offset, bytes(data)))

    def read(self, offset: int, size: int) -> bytes:
        self._check()
        return self._inner.read(offset, size)

    def fsync(self) -> None:
        self._check()
        self._fs._boundary("fsync", self.path)
        if self._fs.sync_to_disk:
            self._inner.fsync()
        self._node.durable = self._node.content(None)
        self._node.unsynced.clear()

    def close(self) -> None:
        if self._generation == self._fs._generation:
            self._inner.close()
            self._fs._handles.discard(self)

    def _check(self) -> None:
        if self._fs.crashed:
            raise SimulatedCrash(f"the process crashed; {self.path} is gone with it")
        if self._generation != self._fs._generation:
            raise RuntimeError(f"handle of {self.path} was opened before the last crash")


class FaultyFileSystem(FileSystem):
    """The real file system under ``root``, with numbered boundaries, crashes and power losses."""

    def __init__(self, root: str, *, crash_at: int | None = None, sync_to_disk: bool = True) -> None:
        self.root = os.path.abspath(root)
        self.crash_at = crash_at  # the boundary at which to crash, or None
        self.sync_to_disk = sync_to_disk  # pass fsyncs on to the disk
        self.events: list[FsEvent] = []  # the boundaries passed, in order
        self.crashed = False
        self.crash_event: FsEvent | None = None  # the boundary that was not performed
        # Called with each boundary before it is performed: what a crash there would leave can be looked at
        # (durable_view, written_view, copy_to) without crashing; it must change nothing here.
        self.on_boundary: Callable[[FsEvent], None] | None = None
        self._inner = OsFileSystem()
        self._generation = 0
        self._handles: set[_FaultyHandle] = set()
        self._tree = self._load(self.root)

    # -- crashes

    @property
    def boundaries(self) -> int:
        """The number of boundaries passed so far."""
        return len(self.events)

    def power_loss(self, torn: Mapping[str, int] | None = None) -> None:
        """Crash (if not crashed yet) and leave on disk only what was durable, plus the ``torn`` prefixes."""
        survivors = self.durable_view(torn).files
        self._kill()
        self._rewrite(self.root, self._tree, survivors)
        self._reset(self._tree, self.root, survivors)
        self._revive()

    def restart_process(self) -> None:
        """Crash (if not crashed yet) without losing power: the OS keeps every write, durable or not."""
        self._kill()
        self._revive()

    def copy_to(self, root: str) -> FaultyFileSystem:
        """The same machine after a process crash, continued in the empty directory ``root``: the files as the
        OS holds them, and the same knowledge of what of them is durable (so a later power loss there loses
        what it would lose here). This file system is left as it is."""
        self.written_view().write_to(root)
        other = FaultyFileSystem(root, sync_to_disk=self.sync_to_disk)
        other._tree = copy.deepcopy(self._tree)
        return other

    def synced_content(self, path: str) -> bytes | None:
        """The bytes of the file now named ``path`` as of its last fsync, whether or not its name is durable."""
        node = self._node(path)
        return node.durable if isinstance(node, _File) else None

    def close(self) -> None:
        """Close every handle opened through this file system: whoever used it is done with it."""
        for handle in list(self._handles):
            handle.close()

    def durable_view(self, torn: Mapping[str, int] | None = None) -> TreeSnapshot:
        """What a power loss now would leave, with the ``torn`` prefixes (as :meth:`power_loss`); changes nothing."""
        torn = dict(torn or {})
        files: dict[str, bytes] = {}
        self._collect(self._tree, self.root, torn, files)
        unknown = set(torn) - set(files)
        if unknown:
            raise ValueError(f"torn writes asked for files that do not survive: {sorted(unknown)}")
        return TreeSnapshot(self.root, files, self._directories(self._tree, self.root, durable=True))

    def written_view(self) -> TreeSnapshot:
        """What the OS holds now, durable or not (what a process crash keeps)."""
        files: dict[str, bytes] = {}
        self._contents(self._tree, self.root, files)
        return TreeSnapshot(self.root, files, self._directories(self._tree, self.root, durable=False))

    def unsynced_files(self) -> dict[str, int]:
        """Bytes written since the last fsync, for each file whose name is durable (what ``torn`` may keep)."""
        view = self.durable_view()
        return {path: n for path in view.files if (n := self.unsynced_bytes(path))}

    def durable_content(self, path: str) -> bytes | None:
        """What a power loss now would leave in ``path`` (no torn writes), or ``None`` if it would be gone."""
        node = self._durable_node(path)
        return node.durable if isinstance(node, _File) else None

    def unsynced_bytes(self, path: str) -> int:
        """Bytes written to ``path`` since its last fsync."""
        node = self._node(path)
        return sum(len(chunk) for _, chunk in node.unsynced) if isinstance(node, _File) else 0

    # -- the file system

    def create(self, path: str) -> FileHandle:
        self._alive()
        parent, name = self._parent(path)
        if name in parent.names:
            raise FileExistsError(path)
        self._boundary("create", path)
        inner = self._inner.create(path)
        node = _File(b"")
        parent.names[name] = node
        return self._track(_FaultyHandle(self, inner, node))

    def open(self, path: str) -> FileHandle:
        self._alive()
        node = self._node(path)
        if not isinstance(node, _File):
            raise FileNotFoundError(path)
        return self._track(_FaultyHandle(self, self._inner.open(path), node))

    def read_file(self, path: str) -> bytes:
        self._alive()
        return self._inner.read_file(path)

    def size(self, path: str) -> int:
        self._alive()
        return self._inner.size(path)

    def exists(self, path: str) -> bool:
        self._alive()
        return self._node(path) is not None

    def is_dir(self, path: str) -> bool:
        self._alive()
        return isinstance(self._node(path), _Dir)

    def list_dir(self, path: str) -> list[str]:
        self._alive()
        node = self._node(path)
        if not isinstance(node, _Dir):
            raise NotADirectoryError(path)
        return sorted(node.names)

    def make_dir(self, path: str) -> None:
        self._alive()
        parent, name = self._parent(path)
        if name in parent.names:
            raise FileExistsError(path)
        self._boundary("make_dir", path)
        self._inner.make_dir(path)
        parent.names[name] = _Dir()

    def rename(self, source: str, target: str) -> None:
        self._alive()
        source_parent, source_name = self._parent(source)
        target_parent, target_name = self._parent(target)
        if source_name not in source_parent.names:
            raise FileNotFoundError(source)
        self._boundary("rename", source, f"to {target}")
        self._inner.rename(source, target)
        target_parent.names[target_name] = source_parent.names.pop(source_name)

    def delete(self, path: str) -> None:
        self._alive()
        parent, name = self._parent(path)
        if name not in parent.names:
            raise FileNotFoundError(path)
        self._boundary("delete", path)
        self._inner.delete(path)
        del parent.names[name]

    def fsync_dir(self, path: str) -> None:
        self._alive()
        node = self._node(path)
        if not isinstance(node, _Dir):
            raise NotADirectoryError(path)
        self._boundary("fsync_dir", path)
        if self.sync_to_disk:
            self._inner.fsync_dir(path)
        node.durable = dict(node.names)

    # -- internals

    def _boundary(self, op: str, path: str, detail: str = "") -> None:
        self._alive()
        event = FsEvent(len(self.events), op, path, detail)
        if self.crash_at is not None and event.index >= self.crash_at:
            self.crashed = True
            self.crash_event = event
            raise SimulatedCrash(f"crash at boundary {event}")
        if self.on_boundary is not None:
            self.on_boundary(event)
        self.events.append(event)

    def _alive(self) -> None:
        if self.crashed:
            raise SimulatedCrash("the process crashed; call power_loss() or restart_process() first")

    def _kill(self) -> None:
        self.crashed = True
        for handle in list(self._handles):
            handle.close()

    def _revive(self) -> None:
        self._generation += 1
        self.crashed = False
        self.crash_at = None

    def _track(self, handle: _FaultyHandle) -> FileHandle:
        self._handles.add(handle)
        return handle

    def _parts(self, path: str) -> list[str]:
        prefix = self.root + os.sep
        if path.startswith(prefix):  # the common case, an absolute path the layout joined: no normalising
            parts = path[len(prefix) :].split(os.sep)
            if all(part not in ("", ".", "..") for part in parts):
                return parts
        relative = os.path.relpath(os.path.abspath(path), self.root)
        if relative == ".":
            return []
        if relative.startswith(".."):
            raise ValueError(f"{path} is outside the faulty file system's root {self.root}")
        return relative.split(os.sep)

    def _node(self, path: str) -> _File | _Dir | None:
        node: _File | _Dir | None = self._tree
        for part in self._parts(path):
            if not isinstance(node, _Dir):
                return None
            node = node.names.get(part)
        return node

    def _durable_node(self, path: str) -> _File | _Dir | None:
        node: _File | _Dir | None = self._tree
        for part in self._parts(path):
            if not isinstance(node, _Dir):
                return None
            node = node.durable.get(part)
        return node

    def _parent(self, path: str) -> tuple[_Dir, str]:
        parts = self._parts(path)
        if not parts:
            raise ValueError("the root cannot be created, renamed or removed")
        parent = self._node(os.path.join(self.root, *parts[:-1]))
        if not isinstance(parent, _Dir):
            raise FileNotFoundError(os.path.dirname(path))
        return parent, parts[-1]

    @staticmethod
    def _load(path: str) -> _Dir:
        directory = _Dir()
        for entry in os.scandir(path):
            node: _File | _Dir
            if entry.is_dir(follow_symlinks=False):
                node = FaultyFileSystem._load(entry.path)
            else:
                with open(entry.path, "rb") as f:
                    node = _File(f.read())
            directory.names[entry.name] = node
        directory.durable = dict(directory.names)
        return directory

    def _collect(self, directory: _Dir, path: str, torn: dict[str, int], out: dict[str, bytes]) -> None:
        for name, node in directory.durable.items():
            child = os.path.join(path, name)
            if isinstance(node, _Dir):
                self._collect(node, child, torn, out)
            else:
                out[child] = node.content(torn.get(child, 0))

    def _contents(self, directory: _Dir, path: str, out: dict[str, bytes]) -> None:
        for name, node in directory.names.items():
            child = os.path.join(path, name)
            if isinstance(node, _Dir):
                self._contents(node, child, out)
            else:
                out[child] = node.content(None)

    def _directories(self, directory: _Dir, path: str, *, durable: bool) -> set[str]:
        found = {path}
        for name, node in (directory.durable if durable else directory.names).items():
            if isinstance(node, _Dir):
                found |= self._directories(node, os.path.join(path, name), durable=durable)
        return found

    def _rewrite(self, path: str, directory: _Dir, survivors: dict[str, bytes]) -> None:
        """Make the real tree under ``path`` hold exactly the durable names, with the surviving bytes."""
        for entry in list(os.scandir(path)):
            node = directory.durable.get(entry.name)
            real_is_dir = entry.is_dir(follow_symlinks=False)
            if node is None or isinstance(node, _Dir) != real_is_dir:
                if real_is_dir:
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        for name, node in directory.durable.items():
            child = os.path.join(path, name)
            if isinstance(node, _Dir):
                if not os.path.isdir(child):
                    os.mkdir(child)
                self._rewrite(child, node, survivors)
            else:
                with open(child, "wb") as f:
                    f.write(survivors[child])

    def _reset(self, directory: _Dir, path: str, survivors: dict[str, bytes]) -> None:
        directory.names = dict(directory.durable)
        for name, node in directory.names.items():
            child = os.path.join(path, name)
            if isinstance(node, _Dir):
                self._reset(node, child, survivors)
            else:
                node.durable = survivors[child]
                node.unsynced.clear()


class _SnapshotHandle(FileHandle):
    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self._data = data

    def write(self, offset: int, data: bytes | bytearray) -> None:
        raise PermissionError(f"{self.path}: a snapshot is read-only")

    def read(self, offset: int, size: int) -> bytes:
        return self._data[offset : offset + size]

    def fsync(self) -> None:
        raise PermissionError(f"{self.path}: a snapshot is read-only")

    def close(self) -> None:
        pass


class TreeSnapshot(FileSystem):
    """A frozen, read-only copy of the tree under ``root``: file contents and directories by absolute path."""

    def __init__(self, root: str, files: Mapping[str, bytes], directories: set[str]) -> None:
        self.root = root
        self.files = dict(files)
        self.directories = frozenset(directories)

    def write_to(self, target: str) -> None:
        """Make the real directory ``target`` (which must be empty or missing) hold this tree, re-rooted there."""
        os.makedirs(target, exist_ok=True)
        if os.listdir(target):
            raise FileExistsError(f"{target} is not empty")
        for directory in sorted(self.directories):
            os.makedirs(self._moved(directory, target), exist_ok=True)
        for path, data in self.files.items():
            with open(self._moved(path, target), "wb") as f:
                f.write(data)

    def relative(self, path: str) -> str:
        """``path`` relative to the snapshot's root."""
        return "." if path == self.root else path[len(self.root) + 1 :]

    def _moved(self, path: str, target: str) -> str:
        return os.path.join(target, self.relative(path))

    def create(self, path: str) -> FileHandle:
        raise PermissionError(f"{path}: a snapshot is read-only")

    def open(self, path: str) -> FileHandle:
        if path not in self.files:
            raise FileNotFoundError(path)
        return _SnapshotHandle(path, self.files[path])

    def read_file(self, path: str) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    def size(self, path: str) -> int:
        return len(self.read_file(path))

    def exists(self, path: str) -> bool:
        return path in self.files or path in self.directories

    def is_dir(self, path: str) -> bool:
        return path in self.directories

    def list_dir(self, path: str) -> list[str]:
        if path not in self.directories:
            raise NotADirectoryError(path)
        prefix = path.rstrip(os.sep) + os.sep
        names = {p[len(prefix) :] for p in (*self.files, *self.directories) if p.startswith(prefix)}
        return sorted(n for n in names if n and os.sep not in n)

    def make_dir(self, path: str) -> None:
        raise PermissionError(f"{path}: a snapshot is read-only")

    def rename(self, source: str, target: str) -> None:
        raise PermissionError(f"{source}: a snapshot is read-only")

    def delete(self, path: str) -> None:
        raise PermissionError(f"{path}: a snapshot is read-only")

    def fsync_dir(self, path: str) -> None:
        raise PermissionError(f"{path}: a snapshot is read-only")
