"""Write the sync driver's I/O from the async one, so that the two cannot drift.

Each ``src/retry_transport/_io/_async_*.py`` of :data:`PAIRS` is a source (the driver's loop,
the resumable body); its ``_sync_*.py`` twin beside it is generated: the source with each
entry of :data:`TABLE` replaced, under a header that says so.
What the table cannot translate is left to hooks each driver writes (``drivers.py``)::

    python scripts/unasync.py            # write _sync_loop.py
    python scripts/unasync.py --check    # exit 1, printing a diff, if it is not current

Standard library only; CI runs the check (``.ci/run``), and ``tests/contracts/test_unasync.py`` too.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "retry_transport" / "_io" / "_async_loop.py"
TARGET = SOURCE.with_name("_sync_loop.py")
#: Every (source, generated file) pair: each ``_async_*.py`` beside ``SOURCE`` and its
#: ``_sync_*.py`` twin.
PAIRS: tuple[tuple[Path, Path], ...] = tuple(
    (source, source.with_name("_sync_" + source.name.removeprefix("_async_")))
    for source in sorted(SOURCE.parent.glob("_async_*.py")))
COMMAND = "python scripts/unasync.py"

#: The token replacements, in order: (regular expression, replacement). Names are matched
#: whole, so that ``abuffer`` is not found inside another name.
TABLE: tuple[tuple[str, str], ...] = (
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\bhandle_async_request\b", "handle_request"),
    (r"\bAsyncLoop\b", "SyncLoop"),
    (r"\bAsyncHedgingLoop\b", "SyncHedgingLoop"),
    (r"\bAsyncHedger\b", "SyncHedger"),
    (r"\bAsyncRetryTransport\b", "RetryTransport"),
    (r"\babuffer\b", "buffer"),
    (r"\basync for\b", "for"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\baclose\b", "close"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncResuming\b", "SyncResuming"),
    (r"\basync_byte_stream\b", "sync_byte_stream"),
    (r"\basync_resuming\b", "sync_resuming"),
    (r"from \._async_loop import", "from ._sync_loop import"),
    (r"from \._async_hedging import", "from ._sync_hedging import"),
    (r"from \._async_resume import", "from ._sync_resume import"),
    (r"from \.hedge_async import", "from .hedge_sync import"),
)

#: What no sync code may hold: an async construct the table missed.
LEFTOVER = re.compile(r"\basync\s+(def|with|for)\b|\bawait\s+[\w(]|\b(aiter|anext)\(")


def header(source: Path) -> str:
    """The generated file's first lines: that it is generated, from what, by what."""
    return (f"# Generated from {source.name} by `{COMMAND}`: do not edit. Edit the\n"
            f"# source, then run the command again (CI checks with `{COMMAND} --check`).\n")


def generate(source: Path = SOURCE) -> str:
    """The sync file's text, made from the async ``source`` by :data:`TABLE`."""
    text = source.read_text(encoding="utf-8")
    for pattern, replacement in TABLE:
        text = re.sub(pattern, replacement, text)
    for number, line in enumerate(text.splitlines(), start=1):
        if LEFTOVER.search(line):
            raise ValueError(f"{source.name}:{number}: not translated by TABLE: {line.strip()}")
    return header(source) + text


def check(source: Path = SOURCE, target: Path = TARGET) -> str:
    """The unified diff from ``target`` as it is to what ``source`` generates: empty when
    the generated file is current."""
    want = generate(source)
    have = target.read_text(encoding="utf-8") if target.exists() else ""
    if have == want:
        return ""
    name = target.name
    return "".join(difflib.unified_diff(have.splitlines(keepends=True),
                                        want.splitlines(keepends=True),
                                        f"{name} (committed)", f"{name} (generated)"))


def main(argv: Sequence[str] | None = None) -> int:
    """Write the sync file, or with ``--check`` compare it: 1 when it is not current."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with a diff if the sync file is stale")
    args = parser.parse_args(argv)
    try:
        if not args.check:
            for source, target in PAIRS:
                target.write_text(generate(source), encoding="utf-8")
            return 0
        diff = "".join(check(source, target) for source, target in PAIRS)
    except ValueError as exc:  # an async construct the table does not translate
        print(f"unasync: {exc}", file=sys.stderr)
        return 1
    if diff:
        sys.stdout.write(diff)
        print(f"a generated sync file is not current: run `{COMMAND}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
