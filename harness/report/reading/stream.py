"""A results file read record by record, so a run of a million records is never one document.

`stream_results` parses the top-level object with the standard JSON decoder, one value at a
time, from a buffer refilled a megabyte at a time; each record of ``records`` is checked
(`harness.report.reading.results`' own rules, duplicates by the test id's hash) and handed to the
caller, then dropped. It answers None whenever it cannot vouch for the file (any problem
at all: not a regular file, not UTF-8, not JSON, a bad field, two records with the same
hash of their test id); the caller then reads the file whole with `read_results`, which
names the problem in its one canonical message, or accepts the file after all.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import QHarnessError
from harness.report.reading.limits import json_decoder
from harness.report.reading.results import _record_problem, results_problem

CHUNK = 1 << 20
_WHITESPACE = re.compile(r"[ \t\n\r]*")  # what JSON allows between tokens


class _Unreadable(QHarnessError):
    """Anything that makes the streamed reading give up (module doc); never leaves this
    module: `stream_results` answers None instead."""


class _Buffer:
    """Decoded text of the file with a read position; refilled as values need more."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.text = ""
        self.pos = 0
        self.eof = False
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.json = json_decoder()

    def fill(self) -> None:
        if self.eof:
            raise _Unreadable("unexpected end")
        chunk = os.read(self.fd, CHUNK)
        self.eof = not chunk
        try:
            more = self.utf8.decode(chunk, final=self.eof)
        except UnicodeDecodeError as exc:
            raise _Unreadable("not UTF-8") from exc
        self.text = self.text[self.pos :] + more
        self.pos = 0

    def skip(self) -> None:
        while True:
            match = _WHITESPACE.match(self.text, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.text) or self.eof:
                return
            self.fill()

    def char(self) -> str:
        """The next character after whitespace ('' at the end), not consumed."""
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, allowed: str) -> str:
        found = self.char()
        if not found or found not in allowed:
            raise _Unreadable(f"expected one of {allowed!r}")
        self.pos += 1
        return found

    def value(self) -> Any:
        """The next JSON value. A number ending at the buffer's end may go on in the next
        chunk: it is taken only once a character follows it (or the file ends)."""
        self.skip()
        while True:
            try:
                found, end = self.json.raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                self.fill()
                continue
            except RecursionError as exc:
                raise _Unreadable("nested too deeply") from exc
            if end == len(self.text) and not self.eof:
                self.fill()
                continue
            self.pos = end
            return found


def _records(buffer: _Buffer, each: Callable[[dict[str, Any]], None]) -> None:
    seen: set[int] = set()
    buffer.expect("[")
    if buffer.char() == "]":
        buffer.pos += 1
        return
    while True:
        record = buffer.value()
        if _record_problem(record):
            raise _Unreadable("a record's problem")
        key = hash(record["nodeid"])
        if key in seen:  # a duplicate, or two ids of one hash: the whole file decides
            raise _Unreadable("a repeated test id")
        seen.add(key)
        each(record)
        if buffer.expect(",]") == "]":
            return


def _document(buffer: _Buffer, each: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    head: dict[str, Any] = {}
    streamed = False
    buffer.expect("{")
    if buffer.char() == "}":
        buffer.pos += 1
    else:
        while True:
            key = buffer.value()
            if not isinstance(key, str):
                raise _Unreadable("a key that is not a string")
            buffer.expect(":")
            if key == "records":
                if streamed:
                    raise _Unreadable("records given twice")
                _records(buffer, each)
                streamed = True
            else:
                head[key] = buffer.value()
            if buffer.expect(",}") == "}":
                break
    if buffer.char():
        raise _Unreadable("data after the document")
    if not streamed:
        raise _Unreadable("no records")
    return head


def stream_results(path: Path, each: Callable[[dict[str, Any]], None]) -> dict[str, Any] | None:
    """Call ``each`` on every record of the results file ``path`` and return the rest of
    the document (validated); None when the file must be read whole instead (module doc),
    in which case ``each`` may have seen some records and its results must be dropped."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = _document(_Buffer(fd), each)
    except (_Unreadable, OSError):
        return None
    finally:
        os.close(fd)
    if results_problem({**head, "records": []}):
        return None
    return head
