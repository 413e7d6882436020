#!/usr/bin/python3
"""A host server's side of service-relay in Python: fetch the tenant's signing
secret over host-sync (HTTP Basic) and sign a short-lived token for a user.

Standard library plus PyJWT (Debian: python3-jwt; pip: PyJWT).

    RELAY_URL=http://127.0.0.1:8080 TENANT_ID=... HOST_SYNC_CLIENT_ID=... \
    HOST_SYNC_CLIENT_SECRET=... ./host.py <user-uuid> [ttl-seconds]

prints the token on stdout. Errors go to stderr with a stable code
(invalid_credentials, rate_limited, unavailable, invalid_response) and a
non-zero exit; no secret is ever printed there.

A real host keeps the secret in memory, fetches it again every minute or so
and right after an operator rotates it, and never sends it to a browser.
"""
import base64
import json
import os
import sys
import time
import urllib.error
import urllib.request

import jwt

ISSUER = "service-relay"


class HostSyncError(Exception):
    def __init__(self, code, message, retry_after=None):
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after


def fetch_secret(base_url, tenant_id, client_id, client_secret, timeout=5.0):
    """POST {base_url}/api/host/tenants/{tenant_id}/jwt_secret/fetch; returns jwt_secret_primary."""
    url = f"{base_url.rstrip('/')}/api/host/tenants/{tenant_id}/jwt_secret/fetch"
    basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
    req = urllib.request.Request(url, data=b"", method="POST", headers={"Authorization": f"Basic {basic}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            raw = res.read()
    except urllib.error.HTTPError as e:
        if e.code == 401:
            raise HostSyncError("invalid_credentials", "host-sync credentials refused (or the tenant is disabled)")
        if e.code == 429:
            retry = e.headers.get("Retry-After", "1")
            raise HostSyncError("rate_limited", f"rate limited: retry after {retry} s", retry_after=int(retry) if retry.isdigit() else 1)
        if e.code >= 500:
            raise HostSyncError("unavailable", f"service-relay answered {e.code}")
        raise HostSyncError("invalid_response", f"unexpected status {e.code}")
    except (urllib.error.URLError, OSError) as e:
        raise HostSyncError("unavailable", f"service-relay unreachable: {type(e).__name__}")
    try:
        body = json.loads(raw)
    except ValueError:
        raise HostSyncError("invalid_response", "the answer is not JSON")
    ok = (isinstance(body, dict) and body.get("kid") == tenant_id and body.get("algorithm") == "HS256"
          and body.get("issuer") == ISSUER and body.get("audience") == ISSUER
          and isinstance(body.get("jwt_secret_primary"), str) and len(body["jwt_secret_primary"]) >= 43)
    if not ok:
        raise HostSyncError("invalid_response", "the answer is not the contract shape")
    return body["jwt_secret_primary"]


def sign_user_token(secret, tenant_id, user_id, ttl_seconds=600):
    """The contract's token: HS256, kid = tenant id, iss/aud service-relay, tenant_id, user_id, integer iat and exp.

    iat lets a user-level revocation (the host API's revoke_tokens) tell tokens
    issued before it from those issued after; a token without iat is refused
    for a revoked user.
    """
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": ISSUER,
        "iat": now,
        "exp": now + int(ttl_seconds),
        "tenant_id": tenant_id,
        "user_id": user_id,
    }
    # The HMAC key is the secret string exactly as fetched (its UTF-8 bytes).
    token = jwt.encode(claims, secret, algorithm="HS256", headers={"kid": tenant_id, "typ": "JWT"})
    return token if isinstance(token, str) else token.decode()  # PyJWT 1.x returns bytes


def main(argv):
    if len(argv) < 2:
        print("usage: host.py <user-uuid> [ttl-seconds]", file=sys.stderr)
        return 2
    env = os.environ
    try:
        base_url, tenant_id = env.get("RELAY_URL", "http://127.0.0.1:8080"), env["TENANT_ID"]
        client_id, client_secret = env["HOST_SYNC_CLIENT_ID"], env["HOST_SYNC_CLIENT_SECRET"]
    except KeyError as e:
        print(f"missing environment variable {e.args[0]}", file=sys.stderr)
        return 2
    try:
        secret = fetch_secret(base_url, tenant_id, client_id, client_secret)
    except HostSyncError as e:
        print(f"{e.code}: {e}", file=sys.stderr)
        return 1
    print(sign_user_token(secret, tenant_id, argv[1], int(argv[2]) if len(argv) > 2 else 600))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
