"""The ``contact=`` option: an e-mail address sent as the ``From`` header (RFC 9110 10.1.2)."""

from __future__ import annotations

import email.utils
import unicodedata

import email_validator

__all__ = ["check_contact"]

_NAME_NOT_ASCII = (
    "contact has a display name that is not ASCII, which a From header cannot carry: "
    "give an ASCII name, or the address alone"
)


def check_contact(contact: object) -> str | None:
    """The header value to send for ``contact``, or ``None``; raises ``TypeError`` for
    anything but a string, ``ValueError`` for an invalid one.

    The value returned is printable ASCII, as every HTTP header value must be: an
    internationalised domain is sent in its IDNA form (``xn--...``); an address whose local
    part is not ASCII, or a display name that is not, is refused.
    """
    if contact is None:
        return None
    if not isinstance(contact, str):
        raise TypeError(f"contact must be an e-mail address (a str), not {type(contact).__name__}")
    for char in contact:
        if unicodedata.category(char) == "Cc":
            raise ValueError(
                f"contact contains the control character {char!r}, which a header cannot carry"
            )
    # Surrounding spaces are not part of a header value (RFC 9110 section 5.5).
    value = contact.strip(" ")
    # Everything before the first "<" of a "Name <address>" form is the display name.
    if value.endswith(">") and "<" in value and not value[: value.index("<")].isascii():
        raise ValueError(_NAME_NOT_ASCII)
    try:
        # Syntax only: no DNS look-up, domains that need not resolve on the internet
        # (ops@build.internal), and the "Name <address>" form that From accepts (RFC 9110
        # section 10.1.2, mailbox). Special-use domains (.local, localhost) are refused.
        checked = email_validator.validate_email(
            value, check_deliverability=False, globally_deliverable=False,
            allow_display_name=True,
        )
    except email_validator.EmailNotValidError as exc:
        raise ValueError(f"contact is not a valid e-mail address: {exc}") from None
    if value.isascii():
        return value
    if checked.ascii_email is None:
        raise ValueError(
            f"contact cannot be sent as a From header: the part before the @-sign "
            f"({checked.local_part!r}) is not ASCII, and a header value must be (a domain "
            "may be internationalised: it is sent in its xn-- form)"
        )
    name = (checked.display_name or "").strip(" ")
    if not name.isascii():
        raise ValueError(_NAME_NOT_ASCII)
    # The domain in its IDNA form; formataddr quotes the name if it needs quoting.
    return email.utils.formataddr((name, checked.ascii_email))
