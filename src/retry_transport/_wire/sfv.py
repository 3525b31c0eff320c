"""Structured Field Values (RFC 8941, with RFC 9651's Date and Display String): the List
parser the ``RateLimit`` field (``_signals.parse_ratelimit``) is read with.

Sans-I/O and pure, like ``_signals``: anything malformed raises :class:`_Malformed`, which the
callers catch; nothing else is raised for what a server sends.
"""

from __future__ import annotations

import re

__all__ = ["Bare", "Malformed", "sf_list"]


class _Malformed(Exception):
    """The text is not a valid Structured Field: raised and caught inside this module."""


# RFC 8941 section 3, with RFC 9651's two later bare items (Date, Display String).
_SF_KEY = re.compile(r"[a-z*][a-z0-9_.*-]*", re.ASCII)
_SF_TOKEN = re.compile(r"[A-Za-z*][!#$%&'*+.^_`|~0-9A-Za-z:/-]*", re.ASCII)
_SF_NUMBER = re.compile(r"-?([0-9]+)(\.[0-9]*)?", re.ASCII)
# chr = unescaped (%x20-21 / %x23-5B / %x5D-7E) / escaped ("\" followed by DQUOTE or "\").
_SF_STRING = re.compile(r'"((?:[ !#-\[\]-~]|\\["\\])*)"', re.ASCII)
_SF_BYTES = re.compile(r":[A-Za-z0-9+/=]*:", re.ASCII)
_SF_BOOLEAN = re.compile(r"\?([01])", re.ASCII)
# RFC 9651 section 4.2.10: VCHAR or SP except DQUOTE and "%", or "%" and two lc hex digits.
_SF_DISPLAY = re.compile(r'%"((?:[ !#$&-~]|%[0-9a-f]{2})*)"', re.ASCII)
_PERCENT = re.compile(rb"%([0-9a-f]{2})")
_SF_UNESCAPE = re.compile(r"\\(.)")

#: A bare item as (kind, value): kinds "integer", "decimal", "string", "token", "bytes",
#: "boolean", "date", "display" (a bool is no integer here, as it is in Python).
_Bare = tuple[str, object]


def _skip(text: str, position: int, characters: str) -> int:
    """The position of the first character at or after ``position`` not in ``characters``."""
    while position < len(text) and text[position] in characters:
        position += 1
    return position


def _sf_number(text: str, start: int) -> tuple[str, object, int]:
    """RFC 8941 section 4.2.4: an Integer (at most 15 digits) or a Decimal (at most 12
    integer digits and 1 to 3 fraction digits); a sign is allowed, an exponent is not."""
    match = _SF_NUMBER.match(text, start)
    if match is None:
        raise _Malformed
    whole, fraction = match.groups()
    if fraction is None:
        if len(whole) > 15:
            raise _Malformed
        return "integer", int(match.group()), match.end()
    if len(whole) > 12 or not 2 <= len(fraction) <= 4:
        raise _Malformed
    return "decimal", float(match.group()), match.end()


def _sf_bare_item(text: str, start: int) -> tuple[_Bare, int]:
    """RFC 8941 section 4.2.3.1 (and RFC 9651's ``@`` Date and ``%"`` Display String)."""
    if start >= len(text):
        raise _Malformed
    first = text[start]
    if first == "-" or "0" <= first <= "9":
        kind, number, end = _sf_number(text, start)
        return (kind, number), end
    if first == '"':
        match = _SF_STRING.match(text, start)
        if match is None:
            raise _Malformed
        return ("string", _SF_UNESCAPE.sub(r"\1", match.group(1))), match.end()
    if first == "*" or first.isascii() and first.isalpha():
        match = _SF_TOKEN.match(text, start)
        if match is None:  # cannot happen: the first character starts a Token
            raise _Malformed
        return ("token", match.group()), match.end()
    if first == ":":
        match = _SF_BYTES.match(text, start)
        if match is None:
            raise _Malformed
        # Only the alphabet is checked: the value is never used, and RFC 8941 asks parsers
        # not to fail on missing "=" padding or non-zero pad bits.
        return ("bytes", match.group()[1:-1]), match.end()
    if first == "?":
        match = _SF_BOOLEAN.match(text, start)
        if match is None:
            raise _Malformed
        return ("boolean", match.group(1) == "1"), match.end()
    if first == "@":
        kind, number, end = _sf_number(text, start + 1)
        if kind != "integer":
            raise _Malformed
        return ("date", number), end
    if first == "%":
        match = _SF_DISPLAY.match(text, start)
        if match is None:
            raise _Malformed
        encoded = _PERCENT.sub(lambda m: bytes([int(m.group(1), 16)]),
                               match.group(1).encode("ascii"))
        try:
            return ("display", encoded.decode("utf-8")), match.end()
        except UnicodeDecodeError:
            raise _Malformed from None
    raise _Malformed


def _sf_parameters(text: str, start: int) -> tuple[dict[str, _Bare], int]:
    """RFC 8941 section 4.2.3.2: ``*( ";" *SP key [ "=" bare-item ] )``; a key without a
    value is Boolean true; a repeated key keeps its last value."""
    parameters: dict[str, _Bare] = {}
    position = start
    while position < len(text) and text[position] == ";":
        position = _skip(text, position + 1, " ")
        match = _SF_KEY.match(text, position)
        if match is None:
            raise _Malformed
        position = match.end()
        value: _Bare = ("boolean", True)
        if position < len(text) and text[position] == "=":
            value, position = _sf_bare_item(text, position + 1)
        parameters[match.group()] = value
    return parameters, position


def _sf_list(text: str) -> list[tuple[_Bare, dict[str, _Bare]]]:
    """RFC 8941 section 4.2.1: a List of Items, ``OWS "," OWS`` between them; an empty text
    is an empty list. Inner Lists, valid in a List, are no Service Limit Items: rejected."""
    members: list[tuple[_Bare, dict[str, _Bare]]] = []
    position = 0
    while position < len(text):
        item, position = _sf_bare_item(text, position)
        parameters, position = _sf_parameters(text, position)
        members.append((item, parameters))
        position = _skip(text, position, " \t")
        if position == len(text):
            break
        if text[position] != ",":
            raise _Malformed
        position = _skip(text, position + 1, " \t")
        if position == len(text):  # a trailing comma
            raise _Malformed
    return members


Malformed = _Malformed
Bare = _Bare
sf_list = _sf_list
