"""Polite batch clients: a From header for the operator, automatic idempotency keys."""

from __future__ import annotations

import re

import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.tables import table
from tests.transport.test_transport import script

pytestmark = pytest.mark.usefixtures("flavour")

#: The transport classes, by name: ``rt`` resolves them under the flavour at test time.
TRANSPORTS = ["RetryTransport", "AsyncRetryTransport"]


def test_contact_sends_a_from_header(harness: Harness) -> None:
    """contact= is sent as From on every attempt (RFC 9110 section 10.1.2)."""
    handler, seen = script(503, 200)
    harness.send(harness.transport(handler, contact="ops@example.com"))
    assert [r.headers["from"] for r in seen] == ["ops@example.com"] * 2


def test_contact_does_not_override_an_explicit_from(harness: Harness) -> None:
    """A From header set on the request wins."""
    handler, seen = script(200)
    harness.send(harness.transport(handler, contact="ops@example.com"),
                 headers={"From": "me@example.org"})
    assert seen[0].headers["from"] == "me@example.org"


@table("address", ["not an address", "ops@", "@example.com", "a b@c.com"], over="cls",
       modes=TRANSPORTS)
def test_invalid_contact_is_a_value_error(cls: str, address: str) -> None:
    """The address is checked at construction, with the validator's reason."""
    with pytest.raises(ValueError, match="contact"):
        getattr(rt, cls)(contact=address)


def test_contact_check_needs_no_network() -> None:
    """Syntax only: a domain that does not exist is accepted (no DNS look-up)."""
    rt.RetryTransport(contact="ops@no-such-domain.invalid-tld-for-tests.example")


@table("address", ["Ops@Example.COM", "Ops Team <ops@example.com>",
                   '"Ops, Team" <ops@example.com>', "<ops@example.com>"])
def test_ascii_contact_is_sent_as_written(harness: Harness, address: str) -> None:
    """An ASCII address or "Name <address>" reaches the server exactly as given."""
    handler, seen = script(200)
    harness.send(harness.transport(handler, contact=address))
    assert seen[0].headers["from"] == address


@table(("address", "sent"), [
    ("ops@exämple.com", "ops@xn--exmple-cua.com"),
    ("ops@ＥＸＡＭＰＬＥ.com", "ops@example.com"),
    ("Ops Team <ops@exämple.com>", "Ops Team <ops@xn--exmple-cua.com>"),
    ('"Ops, Team" <ops@bücher.example>', '"Ops, Team" <ops@xn--bcher-kva.example>'),
])
def test_internationalised_domain_is_sent_in_its_ascii_form(
    harness: Harness, address: str, sent: str
) -> None:
    """A domain that is not ASCII goes out in its IDNA form, on every attempt, as ASCII bytes."""
    handler, seen = script(503, 200)
    response = harness.send(harness.transport(handler, contact=address))
    assert response.status_code == 200
    assert [r.headers["from"] for r in seen] == [sent] * 2
    assert dict(seen[0].headers.raw)[b"From"] == sent.encode("ascii")


def test_surrounding_spaces_are_not_sent(harness: Harness) -> None:
    """Spaces around the contact are dropped, since a header value cannot start or end with one."""
    handler, seen = script(200)
    harness.send(harness.transport(handler, contact="  Ops <ops@example.com> "))
    assert seen[0].headers["from"] == "Ops <ops@example.com>"


@table("address", ["zoë@example.com", "Ops <zoë@exämple.com>", '"Zoë" <ops@example.com>',
                   "Zoë Team <ops@example.com>"], over="cls", modes=TRANSPORTS)
def test_contact_that_cannot_be_ascii_is_refused(cls: str, address: str) -> None:
    """A local part or display name outside ASCII is refused at construction, not per request."""
    with pytest.raises(ValueError, match="^contact .*not ASCII"):
        getattr(rt, cls)(contact=address)


@table("address", ["Ops\r\n <ops@example.com>", "Ops\t<ops@example.com>",
                   "ops@example.com\r\nX-Admin: 1", "Ops\x7f <ops@example.com>"], over="cls",
       modes=TRANSPORTS)
def test_contact_with_a_control_character_is_refused(cls: str, address: str) -> None:
    """CR, LF, tab and other control characters never reach a header."""
    with pytest.raises(ValueError, match="^contact contains the control character"):
        getattr(rt, cls)(contact=address)


@table("value", [42, b"ops@example.com", ["ops@example.com"]], over="cls", modes=TRANSPORTS)
def test_contact_that_is_not_a_str_is_a_type_error(cls: str, value: object) -> None:
    """A contact that is not a str is the wrong kind: a TypeError that names the option."""
    with pytest.raises(TypeError, match="^contact must be an e-mail address"):
        getattr(rt, cls)(contact=value)


UUID_KEY = re.compile(r'^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$')


def test_auto_key_makes_a_post_retryable_with_one_key(harness: Harness) -> None:
    """Each unsafe request gets one fresh quoted UUID key, the same on every attempt."""
    handler, seen = script(503, 503, 200)
    transport = harness.transport(handler, auto_idempotency_key=True)
    assert harness.send(transport, "POST", content=b"x").status_code == 200
    keys = [r.headers["idempotency-key"] for r in seen]
    assert len(keys) == 3 and len(set(keys)) == 1
    assert UUID_KEY.match(keys[0])
    handler2, seen2 = script(200)
    harness.send(harness.transport(handler2, auto_idempotency_key=True), "POST")
    assert seen2[0].headers["idempotency-key"] != keys[0]


def test_auto_key_keeps_an_existing_key_and_skips_safe_methods(harness: Harness) -> None:
    """A key the caller set is kept; idempotent methods get no key."""
    handler, seen = script(200)
    transport = harness.transport(handler, auto_idempotency_key=True)
    harness.send(transport, "POST", headers={"Idempotency-Key": "mine"})
    harness.send(transport, "GET")
    harness.send(transport, "PUT")
    assert seen[0].headers["idempotency-key"] == "mine"
    assert "idempotency-key" not in seen[1].headers
    assert "idempotency-key" not in seen[2].headers


def test_auto_key_off_by_default(harness: Harness) -> None:
    """Without the opt-in a POST gets no key and is not retried."""
    handler, seen = script(503, 200)
    response = harness.send(harness.transport(handler), "POST")
    assert response.status_code == 503
    assert "idempotency-key" not in seen[0].headers


def test_auto_key_follows_the_configured_header(harness: Harness) -> None:
    """The generated key goes in idempotency_header."""
    handler, seen = script(200)
    harness.send(harness.transport(handler, auto_idempotency_key=True,
                                   idempotency_header="X-Idempotency-Token"), "PATCH")
    assert UUID_KEY.match(seen[0].headers["x-idempotency-token"])


def test_request_object_shows_what_was_sent(harness: Harness) -> None:
    """The key and From header are on response.request, so the caller can log them."""
    handler, _ = script(200)
    response = harness.send(harness.transport(handler, auto_idempotency_key=True,
                                              contact="ops@example.com"), "POST")
    assert isinstance(response.request, httpx.Request)
    assert response.request.headers["from"] == "ops@example.com"
    assert UUID_KEY.match(response.request.headers["idempotency-key"])
