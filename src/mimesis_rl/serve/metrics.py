"""Prometheus metrics of one app (its own registry, so two apps in one process never mix counts).

    mimesis_requests_total{route,method,status}     every answered request
    mimesis_request_seconds{route}                  latency histogram
    mimesis_batch_size{kind}                        sessions per batched simulator call
    mimesis_active_sessions                         open sessions
    mimesis_refused_requests_total{reason}          auth, rate limit, size, validation, ... refusals
    mimesis_simulator_refusals_total                user turns the simulator flagged as a refusal
    mimesis_rejected_turns_total                    simulator outputs the parser rejected (user left)
    mimesis_timeouts_total                          requests that waited past the timeout
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from mimesis_rl.envs.protocols import UserReply

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class ServeMetrics:
    """The counters the app and the batcher update; `render()` is the /metrics body."""

    def __init__(self, active_sessions: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("mimesis_requests", "Requests answered", ["route", "method", "status"],
                                registry=r)
        self.latency = Histogram("mimesis_request_seconds", "Request latency", ["route"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.batch_size = Histogram("mimesis_batch_size", "Sessions per batched simulator call", ["kind"],
                                    buckets=BATCH_BUCKETS, registry=r)
        self.active = Gauge("mimesis_active_sessions", "Open sessions", registry=r)
        self.active.set_function(lambda: float(active_sessions()))
        self.refused = Counter("mimesis_refused_requests", "Requests refused with a 4xx/5xx, by reason",
                               ["reason"], registry=r)
        self.sim_refusals = Counter("mimesis_simulator_refusals", "User turns flagged as a refusal",
                                    registry=r)
        self.rejected_turns = Counter("mimesis_rejected_turns", "Simulator outputs rejected by the parser",
                                      registry=r)
        self.timeouts = Counter("mimesis_timeouts", "Requests that waited past request_timeout_s", registry=r)

    def observe_reply(self, reply: UserReply) -> None:
        if rejected(reply):
            self.rejected_turns.inc()
        reason = str(reply.meta.get("error") or reply.meta.get("end_reason") or "")
        if reply.meta.get("refusal") or "role_break" in reason:  # it spoke as an assistant, not a user
            self.sim_refusals.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def rejected(reply: UserReply) -> bool:
    """The simulator produced no usable turn (parser rejection or role break): the user left."""
    return bool(reply.meta.get("error")) or str(reply.meta.get("end_reason", "")).startswith("invalid_turn")
