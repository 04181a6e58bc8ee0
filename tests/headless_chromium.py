"""A real headless Chromium for the tests that check how a page renders (Debian package ``chromium``).

``dump_dom`` gives the document as Chromium built it, after the page's scripts ran for a while of
virtual time; ``screenshot`` the pixels it drew, decoded here (PNG, 8-bit RGB or RGBA, not interlaced:
what Chromium writes) so that no imaging library is needed. Keep screenshots small: the decoder is
plain Python.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

__all__ = ["CHROMIUM_VARIABLE", "ChromiumUnavailableError", "Screenshot", "dump_dom", "find_chromium", "screenshot"]

CHROMIUM_VARIABLE = "LEDGERSPEC_CHROMIUM"  # a Chromium or Chrome binary, used instead of the one on PATH
NAMES = ("chromium", "chromium-browser", "google-chrome")
TIMEOUT = 60  # seconds for one run of the browser


class ChromiumUnavailableError(Exception):
    """No Chromium here; the message says what to install."""


def find_chromium() -> str:
    """The browser to run: $LEDGERSPEC_CHROMIUM, else the first of ``NAMES`` on the PATH."""
    given = os.environ.get(CHROMIUM_VARIABLE)
    if given:
        if not Path(given).is_file():
            raise ChromiumUnavailableError(f"${CHROMIUM_VARIABLE}={given} is not a file")
        return given
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ChromiumUnavailableError("no headless Chromium on the PATH; install it with `apt-get install chromium`")


def _run(page: Path, profile: Path, *options: str) -> str:
    argv = [
        find_chromium(),
        "--headless",
        "--no-sandbox",  # the tests may run as root, in a container
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *options,
        page.resolve().as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{argv[0]} exited with {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def dump_dom(page: Path, profile: Path, *, wait_ms: int = 1000) -> str:
    """The page's document after Chromium loaded it and ran its scripts for ``wait_ms`` of virtual time."""
    return _run(page, profile, f"--virtual-time-budget={wait_ms}", "--dump-dom")


class Screenshot:
    """Pixels of a PNG screenshot, as rows of (r, g, b) tuples."""

    def __init__(self, png: bytes) -> None:
        if png[:8] != b"\x89PNG\r\n\x1a\n":
            raise ValueError("not a PNG file")
        pos, data, header = 8, b"", b""
        while pos < len(png):
            (length,) = struct.unpack(">I", png[pos : pos + 4])
            kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
            if kind == b"IHDR":
                header = body
            elif kind == b"IDAT":
                data += body
            pos += 12 + length
        self.width, self.height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
        if depth != 8 or color not in (2, 6) or interlace:
            raise ValueError(f"PNG of bit depth {depth}, color type {color}, interlace {interlace}: not decoded here")
        channels = 3 if color == 2 else 4
        raw = zlib.decompress(data)
        stride = self.width * channels
        rows: list[bytes] = []
        previous = bytearray(stride)
        for y in range(self.height):
            kind = raw[y * (stride + 1)]
            line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
            for x in range(stride):
                left = line[x - channels] if x >= channels else 0
                up = previous[x]
                corner = previous[x - channels] if x >= channels else 0
                if kind == 1:
                    line[x] = (line[x] + left) & 0xFF
                elif kind == 2:
                    line[x] = (line[x] + up) & 0xFF
                elif kind == 3:
                    line[x] = (line[x] + (left + up) // 2) & 0xFF
                elif kind == 4:
                    p = left + up - corner
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                    line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
            rows.append(bytes(line))
            previous = line
        self.pixels = [[(row[x], row[x + 1], row[x + 2]) for x in range(0, stride, channels)] for row in rows]

    def count(self, color: tuple[int, int, int], tolerance: int = 8) -> int:
        """How many pixels are within ``tolerance`` of ``color`` on each channel."""
        r, g, b = color
        return sum(
            1
            for row in self.pixels
            for pr, pg, pb in row
            if abs(pr - r) <= tolerance and abs(pg - g) <= tolerance and abs(pb - b) <= tolerance
        )

    def colors(self) -> int:
        """How many distinct colors the image has (1: blank)."""
        return len({p for row in self.pixels for p in row})


def screenshot(page: Path, profile: Path, out: Path, *, width: int, height: int, wait_ms: int = 1000) -> Screenshot:
    """What Chromium draws of the page in a window of that size, once its scripts ran for ``wait_ms``."""
    _run(page, profile, f"--window-size={width},{height}", f"--virtual-time-budget={wait_ms}", f"--screenshot={out}")
    return Screenshot(out.read_bytes())
