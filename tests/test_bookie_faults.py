"""The fault-injecting file system: boundaries, crashes, and what a power loss keeps (POSIX rules)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ledgerspec.reference.bookie.faults import FaultyFileSystem, FsEvent, SimulatedCrash
from ledgerspec.reference.bookie.files import OsFileSystem


def test_the_real_file_system_writes_reads_and_renames(tmp_path: Path) -> None:
    fs = OsFileSystem()
    handle = fs.create(str(tmp_path / "a"))
    handle.write(0, b"hello")
    handle.write(10, b"world")  # past the end: a hole of zeros
    handle.fsync()
    assert handle.read(3, 100) == b"lo" + bytes(5) + b"world"
    handle.close()
    fs.rename(str(tmp_path / "a"), str(tmp_path / "b"))
    fs.fsync_dir(str(tmp_path))
    assert fs.list_dir(str(tmp_path)) == ["b"] and fs.size(str(tmp_path / "b")) == 15
    with pytest.raises(FileExistsError):
        fs.create(str(tmp_path / "b"))


def test_power_loss_keeps_fsynced_bytes_and_durable_names_only(tmp_path: Path) -> None:
    (tmp_path / "old").write_bytes(b"was here")  # files present at the start are durable
    fs = FaultyFileSystem(str(tmp_path))
    synced = fs.create(str(tmp_path / "synced"))
    synced.write(0, b"durable")
    synced.fsync()
    synced.write(7, b" lost")  # after the fsync: not durable
    unnamed = fs.create(str(tmp_path / "unnamed"))
    unnamed.write(0, b"x")
    unnamed.fsync()  # data durable, but the name is not: no fsync of the directory yet
    fs.fsync_dir(str(tmp_path))  # now "synced" and "unnamed" have durable names
    late = fs.create(str(tmp_path / "late"))  # created after the directory fsync: its name is lost
    late.write(0, b"y")
    late.fsync()
    fs.delete(str(tmp_path / "old"))  # removal not made durable: the file comes back
    assert fs.durable_content(str(tmp_path / "synced")) == b"durable"
    assert fs.unsynced_bytes(str(tmp_path / "synced")) == 5

    fs.power_loss()
    assert sorted(os.listdir(tmp_path)) == ["old", "synced", "unnamed"]
    assert (tmp_path / "synced").read_bytes() == b"durable"
    assert (tmp_path / "unnamed").read_bytes() == b"x"
    assert (tmp_path / "old").read_bytes() == b"was here"
    with pytest.raises(RuntimeError, match="opened before the last crash"):
        synced.write(0, b"z")


def test_a_torn_write_keeps_a_prefix_of_the_unsynced_bytes_in_order(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    handle = fs.create(str(tmp_path / "j"))
    handle.write(0, b"HEADER")
    handle.fsync()
    fs.fsync_dir(str(tmp_path))
    handle.write(6, b"abcd")
    handle.write(10, b"efgh")
    fs.power_loss(torn={str(tmp_path / "j"): 6})  # all of the first write, half of the second
    assert (tmp_path / "j").read_bytes() == b"HEADERabcdef"
    with pytest.raises(ValueError, match="do not survive"):
        fs.power_loss(torn={str(tmp_path / "nothing"): 1})


def test_a_rename_is_durable_only_with_its_directory(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    handle = fs.create(str(tmp_path / "f.tmp"))
    handle.write(0, b"content")
    handle.fsync()
    fs.fsync_dir(str(tmp_path))
    fs.rename(str(tmp_path / "f.tmp"), str(tmp_path / "f"))
    fs.power_loss()
    assert os.listdir(tmp_path) == ["f.tmp"]  # the rename was not made durable
    fs.rename(str(tmp_path / "f.tmp"), str(tmp_path / "f"))
    fs.fsync_dir(str(tmp_path))
    fs.power_loss()
    assert os.listdir(tmp_path) == ["f"] and (tmp_path / "f").read_bytes() == b"content"


def test_a_directory_that_is_not_durable_takes_its_files_with_it(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    fs.make_dir(str(tmp_path / "d"))
    handle = fs.create(str(tmp_path / "d" / "f"))
    handle.write(0, b"1")
    handle.fsync()
    fs.fsync_dir(str(tmp_path / "d"))  # f's name is durable in d, but d's name is not in the root
    fs.power_loss()
    assert os.listdir(tmp_path) == []
    fs.make_dirs(str(tmp_path / "a" / "b"))  # make_dirs fsyncs each new directory's parent
    fs.power_loss()
    assert (tmp_path / "a" / "b").is_dir()


def test_crash_at_a_boundary_stops_the_process_there(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path), crash_at=2)
    handle = fs.create(str(tmp_path / "f"))  # boundary 0
    handle.write(0, b"one")  # boundary 1
    with pytest.raises(SimulatedCrash, match="crash at boundary #2 fsync"):
        handle.fsync()  # boundary 2: not performed
    assert [e.op for e in fs.events] == ["create", "write"] and fs.crash_event is not None
    with pytest.raises(SimulatedCrash):
        fs.list_dir(str(tmp_path))  # the process is dead
    fs.restart_process()  # the OS kept the write and the name, nothing became durable
    assert (tmp_path / "f").read_bytes() == b"one"
    assert fs.durable_content(str(tmp_path / "f")) is None
    fs.power_loss()
    assert os.listdir(tmp_path) == []


def test_boundaries_are_numbered_and_described(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    fs.create_durably(str(tmp_path / "x"), b"abc").close()
    assert [str(e).replace(str(tmp_path), "") for e in fs.events] == [
        "#0 create /x.tmp",
        "#1 write /x.tmp 3 bytes at 0",
        "#2 fsync /x.tmp",
        "#3 rename /x.tmp to /x",
        "#4 fsync_dir ",
    ]
    fs.power_loss()
    assert (tmp_path / "x").read_bytes() == b"abc"


def test_views_show_what_a_crash_would_leave_without_crashing(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    handle = fs.create_durably(str(tmp_path / "j"), b"HEAD")
    handle.write(4, b"abcdef")
    late = fs.create(str(tmp_path / "late"))  # its name is not durable
    late.write(0, b"x")
    assert fs.unsynced_files() == {str(tmp_path / "j"): 6}  # "late" does not survive a power loss at all
    assert fs.durable_view().files == {str(tmp_path / "j"): b"HEAD"}
    assert fs.durable_view({str(tmp_path / "j"): 2}).files == {str(tmp_path / "j"): b"HEADab"}
    assert fs.written_view().files == {str(tmp_path / "j"): b"HEADabcdef", str(tmp_path / "late"): b"x"}
    assert sorted(fs.written_view().list_dir(str(tmp_path))) == ["j", "late"]
    with pytest.raises(ValueError, match="do not survive"):
        fs.durable_view({str(tmp_path / "late"): 1})
    fs.durable_view({str(tmp_path / "j"): 3}).write_to(str(tmp_path.parent / "copy"))
    assert (tmp_path.parent / "copy" / "j").read_bytes() == b"HEADabc"
    assert (tmp_path / "j").read_bytes() == b"HEADabcdef"  # nothing changed here


def test_a_copy_continues_a_process_crash_elsewhere_with_what_is_durable(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()
    fs = FaultyFileSystem(str(tmp_path / "here"))
    fs.make_dirs(str(tmp_path / "here" / "d"))
    handle = fs.create(str(tmp_path / "here" / "d" / "f"))
    handle.write(0, b"synced")
    handle.fsync()  # the data is durable, the name is not (no fsync of d)
    handle.write(6, b"+more")
    copy = fs.copy_to(str(tmp_path / "there"))
    assert (tmp_path / "there" / "d" / "f").read_bytes() == b"synced+more"  # what the OS holds
    assert copy.synced_content(str(tmp_path / "there" / "d" / "f")) == b"synced"
    copy.fsync_dir(str(tmp_path / "there" / "d"))  # the name becomes durable; the data as of the fsync
    copy.power_loss()
    assert (tmp_path / "there" / "d" / "f").read_bytes() == b"synced"
    assert (tmp_path / "here" / "d" / "f").read_bytes() == b"synced+more"


def test_the_boundary_hook_sees_each_boundary_before_it_is_performed(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    seen = []

    def look(event: FsEvent) -> None:
        seen.append((event.op, fs.durable_view().files.get(str(tmp_path / "f"))))

    fs.on_boundary = look
    handle = fs.create(str(tmp_path / "f"))
    handle.write(0, b"data")
    handle.fsync()
    fs.fsync_dir(str(tmp_path))
    assert seen == [("create", None), ("write", None), ("fsync", None), ("fsync_dir", None)]
    assert fs.durable_view().files == {str(tmp_path / "f"): b"data"}
    fs.close()
    with pytest.raises(OSError):
        handle.read(0, 1)
