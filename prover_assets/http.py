"""HTTP clients of the project (a Kimina Lean Server, `vllm serve` replicas): one session whose
connections are reused across requests, and the wait between a failed attempt and the next."""

from __future__ import annotations

import requests
import requests.adapters

__all__ = ["backoff_s", "pooled_session"]


def pooled_session(hosts: int, per_host: int) -> requests.Session:
    """A session keeping up to `per_host` connections open to each of `hosts` hosts."""
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=hosts, pool_maxsize=per_host)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def backoff_s(attempt: int, first_s: float, most_s: float) -> float:
    """Seconds to wait after failed attempt `attempt` (1, 2, ...): doubling from `first_s`,
    never above `most_s`."""
    return min(first_s * 2 ** (attempt - 1), most_s)
