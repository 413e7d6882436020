#!/usr/bin/python3
"""Verifying service-relay's subscribe/publish callbacks in Python (docs/PROTOCOL.md
"Callbacks"), standard library only. Use it in any web framework: pass the raw
request body (bytes, exactly as received) and its headers.

    from callback import verify_callback, answer, SignatureError
    try:
        req = verify_callback(body, headers, [current_secret, previous_secret])
    except SignatureError:
        return 401
    allowed = may_join(req["user_id"], req["channel"])   # your own database
    return 200, answer(allowed, ttl_s=30)

Self-check: `./callback.py SECRET < request.json` with WEBHOOK_ID,
WEBHOOK_TIMESTAMP and WEBHOOK_SIGNATURE in the environment prints the request.
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time

TOLERANCE_S = 300


class SignatureError(Exception):
    """missing_headers, bad_timestamp, stale or bad_signature."""


def _header(headers, name):
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def verify_callback(body, headers, secrets, tolerance_s=TOLERANCE_S, now=None):
    """Returns the parsed request, or raises SignatureError (a bad or stale signature)."""
    msg_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if msg_id is None or timestamp is None or signatures is None:
        raise SignatureError("missing_headers")
    if not timestamp.isdigit() or len(timestamp) > 12:
        raise SignatureError("bad_timestamp")
    if abs((now if now is not None else time.time()) - int(timestamp)) > tolerance_s:
        raise SignatureError("stale")
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    if isinstance(secrets, str):
        secrets = [secrets]
    candidates = [s[3:] for s in signatures.split(" ") if s.startswith("v1,")]
    for secret in secrets:
        key = base64.b64decode(secret[len("whsec_"):] if secret.startswith("whsec_") else secret)
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        if any(hmac.compare_digest(expected, c) for c in candidates):
            return json.loads(body)
    raise SignatureError("bad_signature")


def verify_webhook(body, headers, secrets, tolerance_s=TOLERANCE_S, now=None):
    """A webhook request (docs/PROTOCOL.md "Webhooks"): the same signature as a
    callback's; returns its events, or raises SignatureError."""
    return verify_callback(body, headers, secrets, tolerance_s, now)["events"]


def answer(allow, ttl_s=None, presence=None):
    """The answer's body (status 200, content-type application/json)."""
    out = {"allow": bool(allow)}
    if ttl_s is not None:
        out["ttl_s"] = int(ttl_s)
    if presence is not None:
        out["presence"] = presence
    return json.dumps(out)


if __name__ == "__main__":
    headers = {
        "webhook-id": os.environ.get("WEBHOOK_ID"),
        "webhook-timestamp": os.environ.get("WEBHOOK_TIMESTAMP"),
        "webhook-signature": os.environ.get("WEBHOOK_SIGNATURE"),
    }
    try:
        print(json.dumps(verify_callback(sys.stdin.buffer.read(), {k: v for k, v in headers.items() if v is not None}, sys.argv[1:])))
    except SignatureError as err:
        print(f"refused: {err}", file=sys.stderr)
        sys.exit(1)
