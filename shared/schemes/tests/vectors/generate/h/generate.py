#!/usr/bin/env python3
"""Test vectors for batch h: asana, airtable, xero, intuit, persona, cal, openai, replicate.

Every key, id, body and timestamp below is a fixed, made-up test value, so a run rewrites the same files.
Where a provider's own SDK (or the package its docs point to) verifies signatures, the generator asks it to
accept each signed case and to refuse the wrong secret (and a stale timestamp where the SDK checks one); a
refusal stops the run with a non-zero exit. mux, segment and trello are made by generate.mjs (Node SDKs).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path

VECTORS = Path(__file__).resolve().parents[2]
NOW = 1767225600  # 2026-01-01T00:00:00Z: every signature below is fresh at this second
HOOK = "https://hooks.example.com/webhooks"


def fail(message: str) -> None:
    sys.exit(f"generate.py: {message}")


def compact(value: object) -> str:
    """JSON as the providers send it: no spaces, keys in the order written."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def mac(algorithm: str, key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), algorithm).digest()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_secret(label: str, size: int = 32) -> bytes:
    """Deterministic made-up key material."""
    return hashlib.sha512(f"webhook-inbox test key {label}".encode()).digest()[:size]


@contextlib.contextmanager
def clock(second: int):
    """Freeze time.time() for SDK checks that read the wall clock."""
    real = time.time
    time.time = lambda: float(second)
    try:
        yield
    finally:
        time.time = real


def refused(check) -> bool:
    """True when the SDK check raises or answers False."""
    try:
        return check() is False
    except Exception:  # noqa: BLE001 - any refusal counts
        return True


def config(secrets, url=None, public_key=None, verify_token=None) -> dict:
    return {"secrets": secrets, "public_key": public_key, "url": url, "verify_token": verify_token}


def case(name, headers, body, expect, *, method="POST", url=None, now=NOW, signed=True) -> dict:
    out = {
        "name": name,
        "method": method,
        "url": url,
        "headers": headers,
        "body": body,
        "now": now,
        "expect": expect,
    }
    if not signed:
        out["signed"] = False
    return out


def event(event_id, event_type, answer=None) -> dict:
    out = {"kind": "event", "event_id": event_id, "event_type": event_type}
    if answer is not None:
        out["answer"] = answer
    return out


def batch(items, answer=None) -> dict:
    out = {"kind": "batch", "items": [{"event_id": i, "event_type": t} for i, t in items]}
    if answer is not None:
        out["answer"] = answer
    return out


def handshake(status=200, content_type="text/plain", body="", headers=None) -> dict:
    answer = {"status": status, "content_type": content_type, "body": body}
    if headers:
        answer["headers"] = headers
    return {"kind": "handshake", "answer": answer}


def write(vector: dict) -> None:
    path = VECTORS / f"{vector['provider']}.json"
    path.write_text(json.dumps(vector, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(VECTORS.parent.parent)} ({len(vector['cases'])} cases)")


# ---------------------------------------------------------------------------------------------- asana


def asana() -> dict:
    secret = test_secret("asana").hex()
    other = test_secret("asana other").hex()
    url = f"{HOOK}/asana"
    user = {"gid": "1201234567890123", "resource_type": "user"}
    task = {"gid": "1209876543210987", "resource_type": "task", "resource_subtype": "default_task"}
    changed = compact(
        {
            "user": user,
            "created_at": "2025-12-31T23:59:57.120Z",
            "action": "changed",
            "resource": task,
            "parent": None,
            "change": {"field": "due_on", "action": "changed"},
        }
    )
    comment = compact(
        {
            "user": user,
            "created_at": "2025-12-31T23:59:58.441Z",
            "action": "added",
            "resource": {"gid": "1209876543219999", "resource_type": "story", "resource_subtype": "comment_added"},
            "parent": task,
        }
    )

    def delivery(items):
        body = '{"events":[' + ",".join(items) + "]}"
        signature = mac("sha256", secret.encode(), body).hex()
        headers = [["content-type", "application/json; charset=utf-8"], ["x-hook-signature", signature]]
        return headers, body

    cases = [
        case(
            "handshake: echo X-Hook-Secret",
            [["content-type", "application/json; charset=utf-8"], ["x-hook-secret", secret]],
            "",
            handshake(200, "text/plain", "", [["x-hook-secret", secret]]),
            url=url,
            signed=False,
        ),
        case("task.changed", *delivery([changed]), batch([(sha256_hex(changed), "task.changed")]), url=url),
        case(
            "two events in one delivery",
            *delivery([changed, comment]),
            batch([(sha256_hex(changed), "task.changed"), (sha256_hex(comment), "story.added")]),
            url=url,
        ),
        case("heartbeat (empty events)", *delivery([]), handshake(200), url=url),
    ]
    return {
        "provider": "asana",
        "made_by": "docs",
        "made_with": "https://developers.asana.com/docs/webhooks-guide (X-Hook-Signature: hex HMAC-SHA256 of the "
        "body with the handshake's X-Hook-Secret); the asana SDK (PyPI 5.4.0, npm 3.2.0) has no verifier",
        "docs": "https://developers.asana.com/docs/webhooks-guide",
        "config": config([secret]),
        "wrong_config": config([other]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "cases": cases,
        "notes": "The handshake POST carries X-Hook-Secret and no signature: answer 200 (or 204) echoing the same "
        "header, never store it. The secret cannot be configured before that handshake; POST /webhooks "
        "(https://developers.asana.com/reference/createwebhook) returns it as X-Hook-Secret in its 201 body, and "
        "the user puts that value in `secrets`. Until then deliveries answer non-2xx and Asana retries them for "
        "up to 24 h. Do not adopt a handshake's secret by itself (anyone can send one first). A body is "
        "{\"events\":[...]}: a batch; each event has no id, so its id is the hex SHA-256 of the item's exact "
        "bytes in the body, and its type is resource.resource_type + '.' + action. The empty-events "
        "heartbeat (every 8 h) is signed and answered 200 without storing.",
    }


# ------------------------------------------------------------------------------------------- airtable


def airtable() -> dict:
    secret_b64 = b64(test_secret("airtable"))
    other_b64 = b64(test_secret("airtable other"))
    url = f"{HOOK}/airtable"
    bodies = [
        compact({"base": {"id": "appT3stB4s3Id0001"}, "webhook": {"id": "achT3stW3bh00k001"}, "timestamp": ts})
        for ts in ("2025-12-31T23:59:58.663Z", "2025-12-31T23:59:59.902Z")
    ]

    from pyairtable.models.webhook import WebhookNotification

    cases = []
    for n, body in enumerate(bodies, 1):
        header = "hmac-sha256=" + mac("sha256", base64.b64decode(secret_b64), body).hex()
        WebhookNotification.from_request(body, header, secret_b64)  # raises if pyairtable refuses it
        if not refused(lambda: WebhookNotification.from_request(body, header, other_b64)):
            fail("pyairtable accepted the airtable vector under the wrong secret")
        cases.append(
            case(
                f"notification ping {n}",
                [["content-type", "application/json"], ["x-airtable-content-mac", header]],
                body,
                event(sha256_hex(body), None),
                url=url,
            )
        )
    return {
        "provider": "airtable",
        "made_by": "docs",
        "made_with": "https://airtable.com/developers/web/api/webhooks-overview#webhook-notification-delivery "
        f"(algorithm); checked with pyairtable {version('pyairtable')} (PyPI, community client) "
        "WebhookNotification.from_request",
        "docs": "https://airtable.com/developers/web/api/webhooks-overview",
        "config": config([secret_b64]),
        "wrong_config": config([other_b64]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "cases": cases,
        "notes": "X-Airtable-Content-MAC is 'hmac-sha256=' + hex HMAC-SHA256 of the body; the key is the "
        "base64-decoded macSecretBase64 from the create-webhook response (configured as shown, base64). The "
        "body is a thin ping (base id, webhook id, timestamp) with no event id: the id is the hex SHA-256 of "
        "the body, the type is null; the changes themselves are read from the webhook's payloads endpoint. "
        "Answer 200 or 204.",
    }


# ----------------------------------------------------------------------------------------------- xero


def xero() -> dict:
    key = b64(hashlib.sha512(b"webhook-inbox test key xero").digest())  # shaped like a Xero webhook key
    other = b64(hashlib.sha512(b"webhook-inbox test key xero other").digest())
    url = f"{HOOK}/xero"
    tenant = "c2cc9b6e-9458-4c7d-93cc-f02b81b0594f"

    def item(category, resource, kind, when):
        path = {"CONTACT": "Contacts", "INVOICE": "Invoices"}[category]
        return compact(
            {
                "resourceUrl": f"https://api.xero.com/api.xro/2.0/{path}/{resource}",
                "resourceId": resource,
                "eventDateUtc": when,
                "eventType": kind,
                "eventCategory": category,
                "tenantId": tenant,
                "tenantType": "ORGANISATION",
            }
        )

    contact = item("CONTACT", "717f2bfc-c6d4-41fd-b238-3f2f0c0cf777", "UPDATE", "2025-12-31T23:59:39.902")
    invoice = item("INVOICE", "2e7a3c1d-5b4f-4e8a-9c6d-0f1e2d3c4b5a", "CREATE", "2025-12-31T23:59:41.117")

    def delivery(items, first, last, entropy):
        body = (
            '{"events":[' + ",".join(items) + f'],"lastEventSequence":{last},"firstEventSequence":{first},'
            f'"entropy":"{entropy}"}}'
        )
        signature = b64(mac("sha256", key.encode(), body))
        return [["content-type", "application/json; charset=utf-8"], ["x-xero-signature", signature]], body

    empty = {"status": 200, "content_type": "text/plain", "body": ""}  # no body at all
    cases = [
        case(
            "intent to receive (correctly signed)",
            *delivery([], 0, 0, "S0m3r4Nd0mt3xt"),
            handshake(200),
            url=url,
        ),
        case(
            "CONTACT.UPDATE",
            *delivery([contact], 1, 1, "FXNGWLCCGVANWHKILRUB"),
            batch([(sha256_hex(contact), "CONTACT.UPDATE")], empty),
            url=url,
        ),
        case(
            "two events in one delivery",
            *delivery([contact, invoice], 2, 3, "QWRTYPLKJHGFDSAZXCVB"),
            batch([(sha256_hex(contact), "CONTACT.UPDATE"), (sha256_hex(invoice), "INVOICE.CREATE")], empty),
            url=url,
        ),
    ]
    return {
        "provider": "xero",
        "made_by": "docs",
        "made_with": "https://developer.xero.com/documentation/webhooks/configuring-your-server "
        "(x-xero-signature: base64 HMAC-SHA256 of the body with the webhook key); xero-python and xero-node "
        "ship no verifier",
        "docs": "https://developer.xero.com/documentation/webhooks/configuring-your-server",
        "config": config([key]),
        "wrong_config": config([other]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "cases": cases,
        "notes": "The webhook key is used as its UTF-8 text, not base64-decoded. Intent to receive: Xero posts "
        "{\"events\":[]...} several times, some correctly and some incorrectly signed; answer 200 with no body "
        "for the correct ones and 401 for the others, within 5 s, without cookies (every answer to Xero: no "
        "body, no cookies). A body is a batch; an event has no id, so its id is the hex SHA-256 of the item's "
        "exact bytes, and its type is eventCategory + '.' + eventType.",
    }


# --------------------------------------------------------------------------------------------- intuit


def intuit() -> dict:
    from quickbooks.client import QuickBooks

    token = "7d8f2e1a-3b4c-4d5e-8f90-a1b2c3d4e5f6"
    other = "0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d"
    url = f"{HOOK}/intuit"
    source = "intuit.dGVzdC1hcHAtd2ViaG9vay1pbmJveC1zb3VyY2U="
    created = compact(
        {
            "specversion": "1.0",
            "id": "88cd52aa-33b6-4351-9aa4-47572edbd068-Customer-58",
            "source": source,
            "type": "qbo.customer.created.v1",
            "datacontenttype": "application/json",
            "time": "2025-12-31T23:59:21.179Z",
            "intuitentityid": "58",
            "intuitaccountid": "9341455000000001",
            "data": {},
        }
    )
    updated = compact(
        {
            "specversion": "1.0",
            "id": "3c9e1f27-8d44-4b6a-a0b5-2f6e7d8c9a01-Invoice-150",
            "source": source,
            "type": "qbo.invoice.updated.v1",
            "time": "2025-12-31T23:59:40Z",
            "intuitentityid": "150",
            "intuitaccountid": "9341455000000002",
        }
    )
    legacy_entities = [
        {"name": "Customer", "id": "1", "operation": "Create", "lastUpdated": "2025-12-31T15:42:19-0800"},
        {"name": "Vendor", "id": "7", "operation": "Update", "lastUpdated": "2025-12-31T15:42:20-0800"},
    ]
    legacy = compact(
        {"eventNotifications": [{"realmId": "1185883450", "dataChangeEvent": {"entities": legacy_entities}}]}
    )

    def signed(body):
        signature = b64(mac("sha256", token.encode(), body))
        if not QuickBooks.validate_webhook_signature(None, body, signature, verifier_token=token):
            fail("python-quickbooks refused an intuit vector")
        if not refused(lambda: QuickBooks.validate_webhook_signature(None, body, signature, verifier_token=other)):
            fail("python-quickbooks accepted an intuit vector under the wrong verifier token")
        return [["content-type", "application/json; charset=utf-8"], ["intuit-signature", signature]], body

    def cloud(event_json):
        parsed = json.loads(event_json)
        return parsed["id"], parsed["type"]

    cases = [
        case("qbo.customer.created.v1", *signed("[" + created + "]"), batch([cloud(created)]), url=url),
        case(
            "two CloudEvents in one delivery",
            *signed("[" + created + "," + updated + "]"),
            batch([cloud(created), cloud(updated)]),
            url=url,
        ),
        case(
            "legacy eventNotifications format",
            *signed(legacy),
            batch(
                [
                    (f"1185883450:{e['name']}:{e['id']}:{e['operation']}:{e['lastUpdated']}", f"{e['name']}.{e['operation']}")
                    for e in legacy_entities
                ]
            ),
            url=url,
        ),
    ]
    return {
        "provider": "intuit",
        "made_by": "docs",
        "made_with": "https://developer.intuit.com/app/developer/qbo/docs/develop/webhooks/managing-webhooks-notifications "
        f"(algorithm); checked with python-quickbooks {version('python-quickbooks')} (PyPI, community client) "
        "QuickBooks.validate_webhook_signature; Intuit's own SDKs with a verifier are PHP/.NET/Java only",
        "docs": "https://developer.intuit.com/app/developer/qbo/docs/develop/webhooks",
        "config": config([token]),
        "wrong_config": config([other]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "cases": cases,
        "notes": "intuit-signature is base64 HMAC-SHA256 of the body, keyed with the app's Verifier Token as text. "
        "Since the CloudEvents migration (https://blogs.intuit.com/2025/11/12/upcoming-change-to-webhooks-payload-structure/, "
        "mandatory in 2026) the body is a JSON array of CloudEvents, possibly of several companies: each item is "
        "one event with its own id and type. The legacy body {\"eventNotifications\":[{realmId, dataChangeEvent: "
        "{entities:[...]}}]} has no ids: each entity is an event with id realmId:name:id:operation:lastUpdated "
        "and type name.operation. Answer 200 within 3 s.",
    }


# -------------------------------------------------------------------------------------------- persona


def persona() -> dict:
    secret = "wbhsec_" + test_secret("persona", 20).hex()
    other = "wbhsec_" + test_secret("persona other", 20).hex()
    retired = "wbhsec_" + test_secret("persona retired", 20).hex()  # the rotating-out secret, in no config
    url = f"{HOOK}/persona"

    def body_for(event_id, name, inquiry, status, created_at):
        return compact(
            {
                "data": {
                    "type": "event",
                    "id": event_id,
                    "attributes": {
                        "name": name,
                        "payload": {
                            "data": {
                                "type": "inquiry",
                                "id": inquiry,
                                "attributes": {"status": status, "reference-id": "user-1234"},
                            }
                        },
                        "created-at": created_at,
                    },
                }
            }
        )

    def v1(key, t, body):
        return mac("sha256", key.encode(), f"{t}.{body}").hex()

    completed = body_for("evt_T3stPersonaEvent0001", "inquiry.completed", "inq_T3stInquiry0001", "completed",
                         "2025-12-31T23:59:59.000Z")
    approved = body_for("evt_T3stPersonaEvent0002", "inquiry.approved", "inq_T3stInquiry0001", "approved",
                        "2025-12-31T23:59:59.500Z")
    t = NOW - 1
    cases = [
        case(
            "inquiry.completed",
            [["content-type", "application/json"], ["persona-signature", f"t={t},v1={v1(secret, t, completed)}"]],
            completed,
            event("evt_T3stPersonaEvent0001", "inquiry.completed"),
            url=url,
        ),
        case(
            "secret rotation: two signature sets",
            [
                ["content-type", "application/json"],
                ["persona-signature", f"t={t},v1={v1(secret, t, approved)} t={t},v1={v1(retired, t, approved)}"],
            ],
            approved,
            event("evt_T3stPersonaEvent0002", "inquiry.approved"),
            url=url,
        ),
    ]
    return {
        "provider": "persona",
        "made_by": "docs",
        "made_with": "https://docs.withpersona.com/docs/webhooks-best-practices (Persona-Signature "
        "t=<unix>,v1=<hex HMAC-SHA256 of '<t>.<body>'>); Persona publishes no server SDK with a verifier",
        "docs": "https://docs.withpersona.com/docs/webhooks-best-practices",
        "config": config([secret]),
        "wrong_config": config([other]),
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "cases": cases,
        "notes": "The secret (wbhsec_...) is the HMAC key as text. While a secret rotates the header holds two "
        "space-separated 't=..,v1=..' sets, one per secret: any may match. Persona documents no tolerance; 300 s "
        "is the default. Event id data.id, type data.attributes.name.",
    }


# ------------------------------------------------------------------------------------------------ cal


def cal() -> dict:
    secret = "cal_test_" + test_secret("cal", 16).hex()
    other = "cal_test_" + test_secret("cal other", 16).hex()
    url = f"{HOOK}/cal"
    booking = {
        "type": "30min",
        "title": "30 Min Meeting between Ada Example and Grace Example",
        "description": None,
        "startTime": "2026-01-05T14:00:00Z",
        "endTime": "2026-01-05T14:30:00Z",
        "organizer": {"id": 5, "name": "Ada Example", "email": "ada@example.com", "timeZone": "Europe/London",
                      "language": {"locale": "en"}, "utcOffset": 0},
        "attendees": [{"name": "Grace Example", "email": "grace@example.com", "timeZone": "America/New_York",
                       "language": {"locale": "en"}, "utcOffset": -300}],
        "uid": "bk7Xq2TestBookingUid0001",
        "bookingId": 101,
        "eventTypeId": 3,
        "status": "ACCEPTED",
    }
    created = compact({"triggerEvent": "BOOKING_CREATED", "createdAt": "2025-12-31T23:59:58.120Z", "payload": booking})
    cancelled = compact(
        {
            "triggerEvent": "BOOKING_CANCELLED",
            "createdAt": "2025-12-31T23:59:59.870Z",
            "payload": {**booking, "status": "CANCELLED", "cancellationReason": "Conflict"},
        }
    )

    def signed(body):
        return [
            ["content-type", "application/json"],
            ["x-cal-signature-256", mac("sha256", secret.encode(), body).hex()],
            ["x-cal-webhook-version", "2021-10-20"],
        ], body

    cases = [
        case("BOOKING_CREATED", *signed(created), event(sha256_hex(created), "BOOKING_CREATED"), url=url),
        case("BOOKING_CANCELLED", *signed(cancelled), event(sha256_hex(cancelled), "BOOKING_CANCELLED"), url=url),
    ]
    return {
        "provider": "cal",
        "made_by": "docs",
        "made_with": "https://cal.com/docs/core-features/webhooks (X-Cal-Signature-256: hex "
        "HMAC-SHA256 of the body with the webhook secret; as calcom/cal.com createWebhookSignature computes it); "
        "no registry package verifies it",
        "docs": "https://cal.com/docs/core-features/webhooks",
        "config": config([secret]),
        "wrong_config": config([other]),
        "signs_timestamp": False,
        "tolerance_secs": 300,
        "cases": cases,
        "notes": "A webhook without a secret is sent with X-Cal-Signature-256: no-secret-provided: always refuse "
        "it (a source needs a secret). The body is {triggerEvent, createdAt, payload} and carries no delivery "
        "id: the id is the hex SHA-256 of the body (payload.uid names the booking, shared by all its events), "
        "the type is triggerEvent. A custom payload template changes the body (and may make it form-encoded or "
        "drop triggerEvent: type null); the signature still covers the raw body. The dashboard's Ping test "
        "sends triggerEvent PING.",
    }


# ---------------------------------------------------------------------------------------------- openai


def openai_vector() -> dict:
    import openai
    from standardwebhooks import Webhook

    secret = "whsec_" + b64(test_secret("openai"))
    other = "whsec_" + b64(test_secret("openai other"))
    retired = "whsec_" + b64(test_secret("openai retired"))  # the rotating-out secret, in no config
    url = f"{HOOK}/openai"
    client = openai.OpenAI(api_key="sk-test-not-a-key", webhook_secret=secret)

    def signed(msg_id, body, t, extra_secret=None):
        from datetime import datetime, timezone

        at = datetime.fromtimestamp(t, tz=timezone.utc)
        signature = Webhook(secret).sign(msg_id, at, body)
        if extra_secret:
            signature = Webhook(extra_secret).sign(msg_id, at, body) + " " + signature
        headers = [
            ["content-type", "application/json"],
            ["webhook-id", msg_id],
            ["webhook-timestamp", str(t)],
            ["webhook-signature", signature],
        ]
        as_dict = dict(headers)
        with clock(NOW):
            client.webhooks.verify_signature(body, as_dict, secret=secret)  # raises if the SDK refuses it
            parsed = client.webhooks.unwrap(body, as_dict, secret=secret)
            if not refused(lambda: client.webhooks.verify_signature(body, as_dict, secret=other)):
                fail("openai SDK accepted the openai vector under the wrong secret")
        with clock(t + 301):
            if not refused(lambda: client.webhooks.verify_signature(body, as_dict, secret=secret)):
                fail("openai SDK accepted a stale openai vector")
        return headers, body, parsed

    response = compact(
        {
            "id": "evt_685343a1381c819085d44c354e1b330e",
            "object": "event",
            "created_at": NOW - 2,
            "type": "response.completed",
            "data": {"id": "resp_68534396cd5c8190a8a5cfc4d37bd06d0a2d7e5a4c8f1b2e"},
        }
    )
    batch_done = compact(
        {
            "id": "evt_6853440ff8b08190a7b59dbb2f0b3f4c",
            "object": "event",
            "created_at": NOW - 1,
            "type": "batch.completed",
            "data": {"id": "batch_6853440a1b2c8190a3f4e5d6c7b8a901"},
        }
    )
    h1, b1, p1 = signed("wh_685342e6c53c8190a1be43f081506c52", response, NOW - 1)
    h2, b2, p2 = signed("wh_6853441a2b3c8190b4d5e6f7a8b9c0d1", batch_done, NOW, extra_secret=retired)
    cases = [
        case("response.completed", h1, b1, event(p1.id, p1.type), url=url),
        case("batch.completed, two signatures (rotation)", h2, b2, event(p2.id, p2.type), url=url),
    ]
    return {
        "provider": "openai",
        "made_by": "sdk",
        "made_with": f"standardwebhooks {version('standardwebhooks')} (PyPI): Webhook.sign; accepted by openai "
        f"{version('openai')} (PyPI): client.webhooks.verify_signature and unwrap",
        "docs": "https://platform.openai.com/docs/guides/webhooks",
        "config": config([secret]),
        "wrong_config": config([other]),
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "cases": cases,
        "notes": "Standard Webhooks: webhook-signature is a space-separated list of v1,<base64 HMAC-SHA256 of "
        "'<webhook-id>.<webhook-timestamp>.<body>'>, key = base64 after whsec_; the SDK allows 300 s both ways. "
        "Event id is the body's id (evt_..., 'the unique ID of the event'); webhook-id (wh_...) is the "
        "delivery's and differs from it; type is the body's type.",
    }


# ------------------------------------------------------------------------------------------- replicate


def replicate_vector() -> dict:
    from replicate.webhook import WebhookSigningSecret, Webhooks
    from standardwebhooks import Webhook

    secret = "whsec_" + b64(test_secret("replicate", 24))
    other = "whsec_" + b64(test_secret("replicate other", 24))
    url = f"{HOOK}/replicate?prediction=demo"

    def prediction(status, output, completed_at, logs):
        return compact(
            {
                "id": "ufawqhfynnddngldkgtslldrkq",
                "model": "replicate/hello-world",
                "version": "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa",
                "input": {"text": "Alice"},
                "logs": logs,
                "output": output,
                "data_removed": False,
                "error": None,
                "status": status,
                "created_at": "2025-12-31T23:59:50.224088Z",
                "started_at": "2025-12-31T23:59:51.102345Z",
                "completed_at": completed_at,
                "urls": {
                    "get": "https://api.replicate.com/v1/predictions/ufawqhfynnddngldkgtslldrkq",
                    "cancel": "https://api.replicate.com/v1/predictions/ufawqhfynnddngldkgtslldrkq/cancel",
                },
                "metrics": {"predict_time": 1.52} if completed_at else {},
                "webhook": url,
                "webhook_events_filter": ["start", "completed"],
            }
        )

    def signed(msg_id, body, t):
        from datetime import datetime, timezone

        signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(t, tz=timezone.utc), body)
        headers = [
            ["content-type", "application/json"],
            ["webhook-id", msg_id],
            ["webhook-timestamp", str(t)],
            ["webhook-signature", signature],
        ]
        as_dict = dict(headers)
        with clock(NOW):
            Webhooks.validate(headers=as_dict, body=body, secret=WebhookSigningSecret(key=secret), tolerance=300)
            if not refused(
                lambda: Webhooks.validate(headers=as_dict, body=body, secret=WebhookSigningSecret(key=other))
            ):
                fail("replicate SDK accepted the replicate vector under the wrong secret")
        with clock(t + 301):
            if not refused(
                lambda: Webhooks.validate(
                    headers=as_dict, body=body, secret=WebhookSigningSecret(key=secret), tolerance=300
                )
            ):
                fail("replicate SDK accepted a stale replicate vector")
        return headers, body

    starting = prediction("starting", None, None, "")
    succeeded = prediction("succeeded", "hello Alice", "2025-12-31T23:59:59.621007Z", "generating\n")
    cases = [
        case("prediction starting", *signed("msg_2aVbTestStart0000000000001", starting, NOW - 5),
             event("msg_2aVbTestStart0000000000001", "starting"), url=url),
        case("prediction succeeded", *signed("msg_2aVbTestDone00000000000002", succeeded, NOW),
             event("msg_2aVbTestDone00000000000002", "succeeded"), url=url),
    ]
    return {
        "provider": "replicate",
        "made_by": "sdk",
        "made_with": f"standardwebhooks {version('standardwebhooks')} (PyPI): Webhook.sign; accepted by replicate "
        f"{version('replicate')} (PyPI): replicate.webhook.Webhooks.validate (and by the npm replicate client's "
        "validateWebhook in generate.mjs)",
        "docs": "https://replicate.com/docs/topics/webhooks/verify-webhook",
        "config": config([secret]),
        "wrong_config": config([other]),
        "signs_timestamp": True,
        "tolerance_secs": 300,
        "cases": cases,
        "notes": "Standard Webhooks with the whsec_ secret from GET /v1/webhooks/default/secret. The body is the "
        "prediction (or training) object itself; one prediction sends several webhooks (start, output, logs, "
        "completed), each with its own webhook-id, which is the event id; the type is the object's status. "
        "Replicate's docs ask for a timestamp check but give no window: 300 s, as Standard Webhooks.",
    }


def main() -> None:
    for build in (asana, airtable, xero, intuit, persona, cal, openai_vector, replicate_vector):
        write(build())


if __name__ == "__main__":
    main()
