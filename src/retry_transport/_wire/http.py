"""Duck-typed reads and writes of requests, responses and URLs of either flavour.

httpx and httpx2 spell their requests, responses and URLs alike, so everything the decisions
read from them (an origin, a header, a declared length, whether a body can be sent again,
whether an error is permanent) and everything the transports write on them (the metadata) is
done here, once, by attribute, without importing either library.
"""

from __future__ import annotations

import io
import re
import ssl
import weakref
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from .._base.flavour import URL, Flavour, Response
from .._base.models import RetryInfo

__all__ = [
    "add_note",
    "attach",
    "clipped_timeouts",
    "count",
    "header",
    "items",
    "length",
    "normalise",
    "origin",
    "permanent",
    "is_signal_free",
    "redact_url",
    "remember",
    "replayable",
    "retry_info",
    "SIGNAL_FREE",
    "TIMING_HEADERS",
    "encoded",
    "scan",
]

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}

# -- origins -----------------------------------------------------------------------------


def _spell(scheme: str, host: str, port: int | None) -> str:
    """``scheme://host:port``, the default port spelt out, IPv6 hosts in brackets."""
    text_host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{text_host}:{port if port is not None else _DEFAULT_PORTS.get(scheme)}"


#: Origins already spelt out, by what identifies them in the URL: a request looks its
#: origin up rather than formatting it. Bounded: cleared when full.
#: The private attributes of httpx's and httpx2's objects the package reads for speed, named
#: here alone; every read falls back to the public API when one is missing or of another
#: kind. A URL's parsed parts: a tuple (scheme, userinfo, host, port, ...), the host
#: lower-case and IDNA-encoded.
URL_PARTS: Final = "_uri_reference"
#: A ``Headers``' lines: a list of (raw name, lower-case name, value), all bytes.
HEADER_LINES: Final = "_list"

_ORIGINS: dict[tuple[object, ...], str] = {}
_ORIGINS_MAX: Final = 4096
#: The last origin looked up the long way for each host, with the scheme and port it was
#: spelt from, for the usual case of a host called at one origin: found by the host alone
#: (a string keeps its hash), then checked, with no key to build. Cleared with
#: ``_ORIGINS``.
_HOSTS: dict[str, tuple[str, object, str]] = {}


def origin(url: URL) -> str:
    """The origin of a URL of either flavour, as ``scheme://host:port``."""
    # httpx and httpx2 keep a URL's parts in a tuple, (scheme, userinfo, host, port, ...),
    # the host lower-case and IDNA-encoded: read at once, where the URL's properties would
    # each work something out.
    try:
        parts = url._uri_reference  # URL_PARTS, read as an attribute: the cheaper way here
        scheme, port, spelt = _HOSTS[parts[2]]
        if parts[0] == scheme and parts[3] == port:
            return spelt
    except (AttributeError, LookupError, TypeError):  # not such a tuple, or a new host
        pass
    return _look_up(url)


def _look_up(url: URL) -> str:
    """:func:`origin` beyond the usual case: by the URL's first four parts (or, without
    them, its properties), spelt out the first time."""
    parts = getattr(url, URL_PARTS, None)
    key = parts[:4] if isinstance(parts, tuple) else (url.scheme, url.raw_host, url.port)
    spelt = _ORIGINS.get(key)
    if spelt is None:
        spelt = _spell(url.scheme, url.host, url.port)
        if len(_ORIGINS) >= _ORIGINS_MAX:
            _ORIGINS.clear()
            _HOSTS.clear()
        _ORIGINS[key] = spelt
    if isinstance(parts, tuple):
        _HOSTS[parts[2]] = parts[0], parts[3], spelt
    return spelt


def normalise(value: object) -> str:
    """The origin of a URL (of either flavour) or of a string (``https://host[:port]``, any
    path), spelt as :func:`origin` spells it."""
    if not isinstance(value, str):
        scheme = getattr(value, "scheme", None)
        host = getattr(value, "host", None)
        if not isinstance(scheme, str) or not isinstance(host, str):
            raise TypeError(f"origin must be a URL or an origin string, got {value!r}")
        return _spell(scheme, host, getattr(value, "port", None))
    parts = urlsplit(value.strip())
    if not parts.scheme or not parts.hostname:
        raise ValueError(f"origin must be a URL or scheme://host[:port], got {value!r}")
    return _spell(parts.scheme.lower(), parts.hostname.lower(), parts.port)


#: Path parameters (``;jsessionid=...``) in a path segment: dropped from logged URLs.
_PATH_PARAMETERS: Final = re.compile(r";[^/]*")


def redact_url(url: URL) -> str:
    """The URL without userinfo, path parameters, query string and fragment, which may
    hold secrets."""
    path = url.raw_path.split(b"?", 1)[0].decode("ascii")
    if ";" in path:
        path = _PATH_PARAMETERS.sub("", path)
    return f"{url.scheme}://{url.netloc.decode('ascii')}{path}"


# -- response headers ----------------------------------------------------------------------


def header(response: Response, name: bytes) -> str | None:
    """One response header, found by its lower-case name (cheaper than ``Headers.get``,
    which works out the headers' encoding anew for every response)."""
    raw: list[tuple[bytes, bytes]] = response.headers.raw
    for key, value in raw:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


#: The most significant digits of a byte count read: 10**18 bytes (an exabyte) is more than
#: any body. A count of more is unusable, never handed to ``int()`` (which raises past 4,300
#: digits, and is slow long before).
_COUNT_DIGITS: Final = 18


def count(value: str) -> int | None:
    """A byte count written in ASCII digits (``Content-Length``, ``Content-Range``), or
    ``None`` when it is malformed or larger than any body. Never raises."""
    if not (value.isascii() and value.isdigit()):
        return None
    digits = value.lstrip("0")
    return int(digits or "0") if len(digits) <= _COUNT_DIGITS else None


def length(response: Response) -> int | None:
    """The declared body length, or ``None`` when absent, malformed or unusable."""
    value = header(response, b"content-length")
    return None if value is None else count(value.strip())


#: The headers a response's signals are read from, besides the names that contain
#: ``ratelimit`` and the policy's ``should_retry_header``.
TIMING_HEADERS: Final = frozenset({b"retry-after", b"retry-after-ms"})

#: Lower-case header names known to carry no signal (neither ``ratelimit`` in them nor a
#: timing header): a response's names are looked up here rather than searched, since a
#: set lookup is several times cheaper than ``b"ratelimit" in name``. Bounded: a server
#: that sends ever new names only makes it start over.
SIGNAL_FREE: set[bytes] = set()
PLAIN_LIMIT: Final = 1024


def is_signal_free(key: bytes) -> bool:
    """Whether ``key`` (a lower-case header name) carries no signal; remembered if so."""
    if b"ratelimit" in key or key in TIMING_HEADERS:
        return False
    if len(SIGNAL_FREE) >= PLAIN_LIMIT:
        SIGNAL_FREE.clear()
    SIGNAL_FREE.add(key)
    return True


def items(response: Response) -> list[tuple[bytes, bytes, bytes]]:
    """The headers as (raw name, lower-case name, value): httpx and httpx2 keep them so
    (:data:`HEADER_LINES`), which spares building ``.raw`` and lower-casing every name."""
    items = getattr(response.headers, HEADER_LINES, None)
    if type(items) is list:
        return items
    return [(key, key.lower(), value) for key, value in response.headers.raw]


_ENCODED: dict[str, bytes] = {}


def encoded(name: str) -> bytes:
    """A header name as the lower-case bytes the responses' names are compared with."""
    key = _ENCODED.get(name)
    if key is None:
        key = _ENCODED[name] = name.lower().encode("ascii")
    return key


#: The most signal header lines read from one response: what real APIs send is a handful,
#: and a response with thousands of them must not cost thousands of parses.
SIGNAL_LINES: Final = 64


def scan(response: Response, verdict: str | None) -> dict[str, str] | None:
    """The response's signal headers by lower-case name, in one pass over the raw headers:
    the rate-limit ones, ``Retry-After``, ``retry-after-ms`` and ``verdict`` (the policy's
    ``should_retry_header``, or ``None``); ``None`` when it has none. Of the rate-limit
    lines, only those among the first ``SIGNAL_LINES`` signal lines are read."""
    name = None if verdict is None else _ENCODED.get(verdict) or encoded(verdict)
    found: dict[str, str] | None = None
    signal_free = SIGNAL_FREE
    lines = 0
    headers = getattr(response.headers, HEADER_LINES, None)  # what items() reads, unless odd
    for _, key, value in headers if type(headers) is list else items(response):
        if key in signal_free and key != name:
            continue
        if key == name or not is_signal_free(key):
            lines += 1
            if lines > SIGNAL_LINES and key != name and key not in TIMING_HEADERS:
                continue  # thousands of rate-limit lines: the first ones are read
            if found is None:
                found = {}
            name_text, text = key.decode("latin-1"), value.decode("latin-1")
            if name_text == "ratelimit" and name_text in found:
                text = f"{found[name_text]}, {text}"  # a list field on several lines (RFC 9110)
            found[name_text] = text
    return found


# -- request bodies and errors ---------------------------------------------------------------


def _rewinds(file: object) -> bool:
    """Whether a file object provably goes back to its start, as httpx rewinds it before
    each send: it says it is seekable, and a trial rewind to 0 works (httpx itself
    swallows a failed rewind, and would send an empty or partial part)."""
    seekable = getattr(file, "seekable", None)
    if not callable(seekable):
        return False
    try:
        if seekable() is not True:
            return False
        file.seek(0)  # type: ignore[attr-defined]
        return bool(file.tell() == 0)  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


def replayable(stream: object, flavour: Flavour) -> bool:
    """Whether a request body can be sent again, judged before each retry."""
    if isinstance(stream, flavour.byte_stream):  # bytes, str, form, JSON, or a read() body
        return True
    fields = getattr(stream, "fields", None)
    if type(stream).__name__ == "MultipartStream" and isinstance(fields, list):
        for item in fields:
            file = getattr(item, "file", None)
            if file is None or isinstance(file, (str, bytes)):
                continue
            if not _rewinds(file):
                return False
        return True
    return False


#: How deep an exception's cause chain is searched for a certificate failure.
_CAUSE_DEPTH: Final = 8


#: The pytest mocks of httpx and httpx2 (pytest-httpx, httpx2-pytest), by module name: a
#: request they have no response for fails with a plain ``TimeoutException`` raised there.
_MOCK_MODULES: Final = ("pytest_httpx.", "pytest_httpx2.")


def _unmatched(exc: BaseException) -> bool:
    """Whether ``exc`` is a pytest mock's "no response registered for this request": a
    plain ``TimeoutException`` (never one of httpx's own timeouts, which are subclasses)
    raised in a mock's module. Recognised by name: neither mock is imported."""
    if type(exc).__name__ != "TimeoutException":
        return False
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__")
    return isinstance(module, str) and module.startswith(_MOCK_MODULES)


def permanent(exc: BaseException) -> bool:
    """Whether a transport error is one no retry can fix: a TLS certificate that failed
    verification (the next handshake meets the same certificate), or a pytest mock that has
    no response registered for the request (a retry finds none either, and the test should
    show that at once)."""
    if _unmatched(exc):
        return True
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < _CAUSE_DEPTH:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return True
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return False


def clipped_timeouts(current: object, remaining: float) -> dict[str, float]:
    """httpx timeouts (connect, read, write, pool) that all end within ``remaining`` seconds."""
    remaining = max(remaining, 0.001)
    timeouts: dict[str, float] = {}
    for key in ("connect", "read", "write", "pool"):
        value = current.get(key) if isinstance(current, Mapping) else None
        timeouts[key] = remaining if value is None else min(value, remaining)
    return timeouts


# -- metadata ----------------------------------------------------------------------------------

_INFO_ATTRIBUTE: Final = "_retry_transport_info"

#: Metadata of exceptions that refuse new attributes (frozen dataclasses, ``__slots__``),
#: by ``id``: kept beside the exception while it lives, never set on it.
_side_infos: dict[int, tuple[weakref.ref[BaseException], RetryInfo]] = {}


def attach(response: Response, info: RetryInfo) -> None:
    """Put ``info`` in a response's extensions (replacing an immutable mapping if need be)."""
    extensions: Any = response.extensions
    try:
        extensions["retry"] = info
    except TypeError:  # an immutable mapping from some inner transport
        response.extensions = {**extensions, "retry": info}


def remember(exc: BaseException, info: RetryInfo, note: str | None = None) -> None:
    """Attach ``info`` to ``exc``, on it when it allows, beside it otherwise; add ``note``
    to it (Python 3.11+) when given."""
    try:
        setattr(exc, _INFO_ATTRIBUTE, info)
    except Exception:  # FrozenInstanceError, AttributeError from __slots__, anything
        key = id(exc)

        def forget(_: object, key: int = key) -> None:
            _side_infos.pop(key, None)

        try:
            _side_infos[key] = (weakref.ref(exc, forget), info)
        except TypeError:  # an exception type without weak references: nothing is kept
            pass
    if note is not None:
        add_note(exc, note)


def add_note(exc: BaseException, note: str) -> None:
    """Add ``note`` to ``exc`` (Python 3.11+); an exception that refuses ``__notes__`` goes
    without it."""
    add = getattr(exc, "add_note", None)
    if add is not None:
        try:
            add(note)
        except Exception:
            pass


def retry_info(obj: object) -> RetryInfo | None:
    """Return the :class:`RetryInfo` of a response or of an exception raised by a transport.

    Returns ``None`` for anything the transports did not handle.
    """
    if isinstance(obj, BaseException):
        info = getattr(obj, _INFO_ATTRIBUTE, None)
        if info is None:
            entry = _side_infos.get(id(obj))
            if entry is not None and entry[0]() is obj:
                info = entry[1]
    else:  # a response of either flavour: the record is in its extensions
        extensions = getattr(obj, "extensions", None)
        info = extensions.get("retry") if isinstance(extensions, Mapping) else None
    return info if isinstance(info, RetryInfo) else None
