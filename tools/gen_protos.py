"""Generate the ``_pb2`` modules from the project's copies of BookKeeper's .proto files.

Run by ``tox -e protos``, which pins the grpcio-tools release (and with it
protoc) so that the generated code does not change between machines. The
generated modules are committed; nothing at run time needs grpcio-tools.

    python -m ledgerspec.tools.gen_protos            # rewrite the generated modules
    python -m ledgerspec.tools.gen_protos --check    # exit 1 if they differ from what protoc makes now
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

__all__ = ["PROTO_PACKAGES", "generate", "main"]

# Packages holding .proto files; each module is generated next to its .proto.
PROTO_PACKAGES = ["ledgerspec.reference.metadata.protos", "ledgerspec.reference.wire.protos"]


def _protoc(args: list[str]) -> int:
    try:
        protoc = importlib.import_module("grpc_tools.protoc")
    except ImportError:
        sys.exit("gen_protos needs grpcio-tools: run `tox -e protos`, or pip install grpcio-tools==1.71.0")
    status: int = protoc.main(["protoc", *args])
    return status


def generate(proto_dir: Path, out_dir: Path) -> list[Path]:
    """Run protoc on every .proto of ``proto_dir``; return the files written to ``out_dir``."""
    protos = sorted(proto_dir.glob("*.proto"))
    if not protos:
        sys.exit(f"no .proto files in {proto_dir}")
    status = _protoc([f"-I{proto_dir}", f"--python_out={out_dir}", f"--pyi_out={out_dir}", *map(str, protos)])
    if status != 0:
        sys.exit(f"protoc failed with status {status} on {proto_dir}")
    return [out_dir / f"{proto.stem}_pb2{suffix}" for proto in protos for suffix in (".py", ".pyi")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed modules, write nothing")
    args = parser.parse_args(argv)
    stale = []
    for package in PROTO_PACKAGES:
        proto_dir = Path(importlib.import_module(package).__file__ or "").parent
        if not args.check:
            for written in generate(proto_dir, proto_dir):
                print(f"wrote {written}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            for fresh in generate(proto_dir, Path(tmp)):
                committed = proto_dir / fresh.name
                if not committed.exists() or committed.read_bytes() != fresh.read_bytes():
                    stale.append(committed)
    for path in stale:
        print(f"out of date: {path} (run `tox -e protos`)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
