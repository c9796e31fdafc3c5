"""Who may call a shared endpoint, and how much: API keys per tenant, a request rate and a
concurrency limit per key, and a cap on requests in flight over everyone.

Keys come from a JSON file (a mounted secret), never from settings printed in logs; only their
SHA-256 is kept, so a lookup does not compare secrets character by character. Without a keys
file the endpoint is open (local use) and the limits apply per client address instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from services.common.errors import RateLimited, Unauthenticated
from services.gateway.settings import GatewaySettings

# When a concurrency limit is hit there is no way to know when a slot frees; a request takes
# seconds to minutes, so a client is told to come back in a few seconds.
CONCURRENCY_RETRY_S = 5.0


@dataclass
class Tenant:
    name: str
    requests_per_minute: float
    max_concurrent: int


class KeyFileError(ValueError):
    pass


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def load_keys(path: Path, settings: GatewaySettings) -> dict[str, Tenant]:
    """{sha256(key): Tenant}; KeyFileError naming the file and the entry for a malformed file."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise KeyFileError(f"API keys file {path}: {exc}") from None
    if not isinstance(raw, dict) or not raw:
        raise KeyFileError(f"API keys file {path}: expected a JSON object of keys, got none")
    tenants = {}
    for index, (key, entry) in enumerate(raw.items(), start=1):
        where = f"API keys file {path}, entry {index}"
        if len(key.strip()) < 16:
            raise KeyFileError(f"{where}: keys must be at least 16 characters")
        entry = entry if isinstance(entry, dict) else {"tenant": entry}
        unknown = set(entry) - {"tenant", "requests_per_minute", "max_concurrent"}
        if unknown or not isinstance(entry.get("tenant"), str) or not entry["tenant"]:
            raise KeyFileError(f"{where}: needs a non-empty \"tenant\", and only "
                               "requests_per_minute and max_concurrent besides")
        rpm = entry.get("requests_per_minute", settings.requests_per_minute)
        concurrent = entry.get("max_concurrent", settings.max_concurrent_per_key)
        if not (isinstance(rpm, (int, float)) and rpm > 0 and isinstance(concurrent, int)
                and concurrent >= 1):
            raise KeyFileError(f"{where}: requests_per_minute must be > 0 and max_concurrent "
                               ">= 1")
        tenants[_digest(key.strip())] = Tenant(entry["tenant"], float(rpm), concurrent)
    return tenants


class _Bucket:
    """Token bucket: `rate_per_minute` tokens a minute, as many in a burst."""

    def __init__(self, rate_per_minute: float):
        self.capacity = rate_per_minute
        self.per_second = rate_per_minute / 60.0
        self.tokens = rate_per_minute
        self.updated = time.monotonic()

    def take(self) -> float:
        """0 when a token was taken, else the seconds until one is there."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.per_second)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.per_second


class Guard:
    def __init__(self, settings: GatewaySettings):
        self.settings = settings
        self.tenants = load_keys(settings.api_keys_file, settings) if settings.api_keys_file else None
        self._by_name = {t.name: t for t in (self.tenants or {}).values()}
        self._buckets: dict[str, _Bucket] = {}
        self._in_flight: dict[str, int] = {}
        self._total = 0

    @property
    def auth_required(self) -> bool:
        return self.tenants is not None

    def authenticate(self, api_key: str | None, peer: str) -> str:
        """The tenant's name; the client's address when keys are off."""
        if self.tenants is None:
            return f"address {_host(peer)}"
        if not api_key:
            raise Unauthenticated("this endpoint needs an API key: send it in the x-api-key "
                                  "metadata (HTTP: the X-API-Key header)")
        tenant = self.tenants.get(_digest(api_key.strip()))
        if tenant is None:
            raise Unauthenticated("the API key is not valid for this endpoint")
        return tenant.name

    def _tenant(self, name: str) -> Tenant:
        if name in self._by_name:
            return self._by_name[name]
        return Tenant(name, self.settings.requests_per_minute, self.settings.max_concurrent_per_key)

    @contextlib.asynccontextmanager
    async def admit(self, tenant_name: str) -> AsyncIterator[None]:
        """Holds one of the tenant's and the endpoint's slots for the request; RateLimited before
        entering when a limit is reached."""
        tenant = self._tenant(tenant_name)
        if self._total >= self.settings.max_concurrent:
            raise RateLimited(f"the endpoint is serving its maximum of "
                              f"{self.settings.max_concurrent} requests", CONCURRENCY_RETRY_S)
        if self._in_flight.get(tenant.name, 0) >= tenant.max_concurrent:
            raise RateLimited(f"{tenant.name} already has {tenant.max_concurrent} requests "
                              "running; wait for one to finish", CONCURRENCY_RETRY_S)
        bucket = self._buckets.setdefault(tenant.name, _Bucket(tenant.requests_per_minute))
        wait = bucket.take()
        if wait:
            raise RateLimited(f"{tenant.name} is over its limit of "
                              f"{tenant.requests_per_minute:g} requests per minute",
                              max(1.0, math.ceil(wait)))
        self._in_flight[tenant.name] = self._in_flight.get(tenant.name, 0) + 1
        self._total += 1
        try:
            yield
        finally:
            self._in_flight[tenant.name] -= 1
            self._total -= 1


def _host(peer: str) -> str:
    """"ipv4:127.0.0.1:5123" / "ipv6:[::1]:5123" / "127.0.0.1" -> the host part."""
    address = peer.split(":", 1)[1] if peer.startswith(("ipv4:", "ipv6:")) else peer
    if address.startswith("["):
        return address[1:address.find("]")]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address
