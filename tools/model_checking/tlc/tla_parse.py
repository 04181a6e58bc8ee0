"""Read TLA+ values and states in the form TLC prints them.

TLC prints values in error traces, in ``-dump FILE`` files (written to
``FILE.dump``) and in its messages.  This module turns that text into the
normal form of :mod:`ledgerspec.spec.values`: ``int``, ``bool``, ``str``
(strings and model values alike), ``frozenset``, ``tuple`` (sequences and
every function whose domain is ``1..n``) and :class:`FnValue` (records and
all other functions).

What TLC prints, and so what is read here::

    -3  TRUE  FALSE  "a\\"b\\n"  mv          integers, booleans, strings, model values
    {1, 2}  <<1, "x">>  << >>               sets, sequences (``<< >>`` is the empty function)
    [a |-> 1, b |-> "x"]                    records
    (1 :> 2 @@ 3 :> 4)                      functions that are neither records nor sequences
    2..5                                    integer intervals (TLC keeps them unexpanded)

A state is a conjunction ``/\\ x = <value>`` of one line per variable, where a
value may continue over several indented lines; a state with one variable is
printed as a bare ``x = <value>``.

Left out: values TLC does not print in states (``[x \\in S |-> e]``,
``SUBSET S``, ``[S -> T]``, ``S \\X T`` and other unevaluated set
expressions; TLC enumerates those before it stores a state), the dot format
of ``-dump dot``, and ``-difftrace`` partial states (read them as partial
dicts).

Parsing uses one regular expression to split the text into tokens and a
recursive-descent reader over the tokens.  :func:`iter_dump` caches the value
of every ``var = value`` line it has seen, since consecutive states mostly
repeat most of their variables.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledgerspec.spec.values import FnValue

__all__ = ["TlaParseError", "iter_dump", "parse_dump", "parse_state", "parse_value"]


class TlaParseError(ValueError):
    """Text that is not a TLA+ value or state as TLC prints it.

    ``line`` and ``column`` are 1-based; ``source`` names the file when the
    text came from one.
    """

    def __init__(self, what: str, *, line: int, column: int, snippet: str, source: str | None = None) -> None:
        where = f"{source}:" if source else ""
        super().__init__(f"{what} at {where}line {line}, column {column}\n{snippet}")
        self.what = what
        self.line = line
        self.column = column
        self.source = source


# One token per match: an integer, a string, a name (model value, record
# field, TRUE/FALSE), an operator, or any other single character (an error).
# findall returns the token texts without building match objects; the reader
# tells token kinds apart by their first character.  Positions are worked out
# again only to report an error.
_TOKEN_RE = re.compile(
    r"""
    \s*(
        -?[0-9]+(?![A-Za-z0-9_])
      | "(?:[^"\\\n]|\\.)*"
      | [A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*
      | <<|>>|\|->|:>|@@|\.\.|[{}\[\](),]
      | \S
    )
    """,
    re.VERBOSE,
)
_OPERATORS = frozenset(["<<", ">>", "|->", ":>", "@@", "..", "{", "}", "[", "]", "(", ")", ","])
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_INT_START = frozenset("-0123456789")
_ESCAPE_RE = re.compile(r"\\(.)")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "f": "\f"}
_END = ""  # the token after the last one


def _is_int(token: str) -> bool:
    return (token[0] == "-" and token[1:].isdigit()) or token.isdigit()


def _is_name(token: str) -> bool:
    # A name may start with a digit ("1st"), then it is not all digits.
    return token[0] in _NAME_START or (token[0].isdigit() and not token.isdigit())


class _Reader:
    """Recursive-descent reader over the tokens of ``text[start:end]``.

    Error positions are absolute in ``text``, so that they point into the
    text the caller handed over.
    """

    __slots__ = ("end", "i", "line_offset", "source", "start", "text", "tokens")

    def __init__(self, text: str, start: int, end: int, *, source: str | None, line_offset: int) -> None:
        self.text = text
        self.start = start
        self.end = end
        self.source = source
        self.line_offset = line_offset
        self.tokens: list[str] = _TOKEN_RE.findall(text, start, end)
        self.tokens.append(_END)
        self.i = 0

    # -- errors -------------------------------------------------------------

    def position(self, index: int) -> int:
        """Where token ``index`` starts in ``text``."""
        for n, m in enumerate(_TOKEN_RE.finditer(self.text, self.start, self.end)):
            if n == index:
                return m.start(1)
        return self.end

    def error(self, what: str, pos: int | None = None) -> TlaParseError:
        if pos is None:
            pos = self.position(self.i)
        text = self.text
        line_start = text.rfind("\n", 0, pos) + 1
        line_end = text.find("\n", pos)
        if line_end == -1:
            line_end = len(text)
        line_text = text[line_start:line_end]
        column = pos - line_start + 1
        # Keep the snippet short on the long single lines of big values.
        lo = max(0, column - 1 - 60)
        shown = line_text[lo : column - 1 + 60]
        snippet = f"  {shown}\n  {' ' * (column - 1 - lo)}^"
        line = text.count("\n", 0, pos) + 1 + self.line_offset
        return TlaParseError(what, line=line, column=column, snippet=snippet, source=self.source)

    def unexpected(self, expected: str) -> TlaParseError:
        token = self.tokens[self.i]
        if token == '"':
            return self.error("unterminated string")
        found = repr(token) if token else "end of input"
        return self.error(f"expected {expected}, found {found}")

    def expect(self, op: str) -> None:
        if self.tokens[self.i] == op:
            self.i += 1
            return
        raise self.unexpected(repr(op))

    # -- grammar ------------------------------------------------------------

    def value(self) -> Any:
        i = self.i
        token = self.tokens[i]
        self.i = i + 1
        first = token[:1]
        if first in _INT_START:
            if token.isdigit() or (first == "-" and token[1:].isdigit()):
                if self.tokens[i + 1] == "..":
                    return self.interval(int(token))
                return int(token)
            if first != "-":
                return token  # a model value whose name starts with a digit
        elif first in _NAME_START:
            if token == "TRUE":
                return True
            if token == "FALSE":
                return False
            return token  # a model value
        elif first == '"':
            if len(token) > 1:
                return self.string(token, i)
        elif token == "{":
            return frozenset(self.items("}"))
        elif token == "<<":
            return tuple(self.items(">>"))
        elif token == "[":
            return self.record()
        elif token == "(":
            return self.function()
        self.i = i
        raise self.unexpected("a value")

    def interval(self, low: int) -> frozenset[int]:
        self.i += 1  # the ".."
        token = self.tokens[self.i]
        if not token or not _is_int(token):
            raise self.unexpected("an integer after '..'")
        self.i += 1
        return frozenset(range(low, int(token) + 1))

    def items(self, close: str) -> list[Any]:
        out: list[Any] = []
        tokens = self.tokens
        if tokens[self.i] == close:
            self.i += 1
            return out
        while True:
            out.append(self.value())
            token = tokens[self.i]
            self.i += 1
            if token == ",":
                continue
            if token == close:
                return out
            self.i -= 1
            raise self.unexpected(f"',' or {close!r}")

    def record(self) -> FnValue:
        fields: dict[str, Any] = {}
        tokens = self.tokens
        while True:
            name = tokens[self.i]
            if not name or name in _OPERATORS or not _is_name(name):
                raise self.unexpected("a record field name")
            name_index = self.i
            self.i += 1
            self.expect("|->")
            if name in fields:
                raise self.error(f"record field {name!r} given twice", self.position(name_index))
            fields[name] = self.value()
            token = tokens[self.i]
            self.i += 1
            if token == ",":
                continue
            if token == "]":
                return FnValue.of(fields)
            self.i -= 1
            raise self.unexpected("',' or ']'")

    def function(self) -> Any:
        mapping: dict[Any, Any] = {}
        tokens = self.tokens
        while True:
            key_index = self.i
            key = self.value()
            self.expect(":>")
            if key in mapping:
                raise self.error("function argument given twice", self.position(key_index))
            mapping[key] = self.value()
            token = tokens[self.i]
            self.i += 1
            if token == "@@":
                continue
            if token == ")":
                return _function(mapping)
            self.i -= 1
            raise self.unexpected("'@@' or ')'")

    def string(self, token: str, index: int) -> str:
        body = token[1:-1]
        if "\\" not in body:
            return body

        def unescape(m: re.Match[str]) -> str:
            replacement = _ESCAPES.get(m.group(1))
            if replacement is None:
                pos = self.position(index) + 1 + m.start()
                raise self.error(f"unknown escape '\\{m.group(1)}' in string", pos)
            return replacement

        return _ESCAPE_RE.sub(unescape, body)

    def at_end(self) -> bool:
        return not self.tokens[self.i]


def _function(mapping: dict[Any, Any]) -> Any:
    """A function value in normal form: a tuple if its domain is ``1..n``."""
    n = len(mapping)
    if all(type(k) is int for k in mapping) and all(i in mapping for i in range(1, n + 1)):
        return tuple(mapping[i] for i in range(1, n + 1))
    return FnValue.of(mapping)


def parse_value(text: str) -> Any:
    """Parse one TLA+ value as TLC prints it, e.g. ``[a |-> {1, 2}, b |-> <<"x">>]``."""
    reader = _Reader(text, 0, len(text), source=None, line_offset=0)
    if reader.at_end():
        raise reader.error("expected a value, found end of input")
    value = reader.value()
    if not reader.at_end():
        raise reader.unexpected("end of value")
    return value


# A conjunct starts a line with "/\ "; continuation lines of a value are
# indented, and strings never hold a raw line break, so this split is exact.
_CONJUNCT_RE = re.compile(r"^/\\ ", re.MULTILINE)
_BINDING_RE = re.compile(r"[ \t\r\n]*([A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*)[ \t]*=(?!=)")


def _parse_state(
    text: str,
    *,
    source: str | None = None,
    line_offset: int = 0,
    cache: dict[str, tuple[str, Any]] | None = None,
) -> dict[str, Any]:
    state: dict[str, Any] = {}
    starts = [m.end() for m in _CONJUNCT_RE.finditer(text)]
    if not starts:
        if not text.strip():
            return state
        starts = [0]
    elif text[: starts[0] - 3].strip():
        reader = _Reader(text, 0, len(text), source=source, line_offset=line_offset)
        raise reader.error("expected '/\\ ' at the start of a state line")
    bounds = [*(s - 3 for s in starts[1:]), len(text)]
    for start, end in zip(starts, bounds, strict=True):
        if cache is not None:
            key = text[start:end]
            hit = cache.get(key)
            if hit is not None and hit[0] not in state:
                state[hit[0]] = hit[1]
                continue
        m = _BINDING_RE.match(text, start, end)
        if m is None:
            reader = _Reader(text, start, end, source=source, line_offset=line_offset)
            raise reader.error("expected 'variable = value'")
        name = m.group(1)
        reader = _Reader(text, m.end(), end, source=source, line_offset=line_offset)
        if reader.at_end():
            raise reader.error(f"expected a value for variable {name!r}", m.end())
        value = reader.value()
        if not reader.at_end():
            raise reader.unexpected("end of value")
        if name in state:
            raise reader.error(f"variable {name!r} given twice", m.start(1))
        state[name] = value
        if cache is not None:
            if len(cache) > 200_000:
                cache.clear()
            cache[text[start:end]] = (name, value)
    return state


def parse_state(text: str) -> dict[str, Any]:
    """Parse a state block (``/\\ x = 1`` lines, or a bare ``x = 1``) into ``{variable: value}``."""
    return _parse_state(text)


_STATE_HEADER_RE = re.compile(r"State (\d+):[ \t]*\r?\n?")


def iter_dump(path: Path | str) -> Iterator[dict[str, Any]]:
    """Yield the states of a TLC ``-dump`` file one by one, in file order.

    ``path`` is the file TLC wrote (``FILE.dump`` for ``-dump FILE``); if it
    does not exist but ``path + ".dump"`` does, that file is read.
    """
    path = Path(path)
    if not path.exists() and Path(f"{path}.dump").exists():
        path = Path(f"{path}.dump")
    source = str(path)
    cache: dict[str, tuple[str, Any]] = {}
    block: list[str] = []
    block_line = 0  # 1-based file line of the block's first state line
    expected = 1
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            header = _STATE_HEADER_RE.fullmatch(line)
            if header is not None:
                if block_line:
                    yield _parse_state("".join(block), source=source, line_offset=block_line - 1, cache=cache)
                elif "".join(block).strip():
                    raise TlaParseError(
                        "expected 'State 1:'", line=1, column=1, snippet=f"  {block[0].rstrip()}", source=source
                    )
                number = int(header.group(1))
                if number != expected:
                    raise TlaParseError(
                        f"expected state number {expected}, found {number}",
                        line=line_no,
                        column=7,
                        snippet=f"  {line.rstrip()}",
                        source=source,
                    )
                expected += 1
                block = []
                block_line = line_no + 1
            else:
                block.append(line)
    if block_line:
        yield _parse_state("".join(block), source=source, line_offset=block_line - 1, cache=cache)
    elif "".join(block).strip():
        raise TlaParseError("expected 'State 1:'", line=1, column=1, snippet=f"  {block[0].rstrip()}", source=source)


def parse_dump(path: Path | str) -> list[dict[str, Any]]:
    """All states of a TLC ``-dump`` file, in file order (see :func:`iter_dump`)."""
    return list(iter_dump(path))
