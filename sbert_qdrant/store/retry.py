"""One retry policy for remote Qdrant calls: backoff with jitter on transient faults, never on validation errors."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from ..errors import CollectionNotFoundError, InvalidArgumentError, StoreError, StoreUnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP statuses worth another try: rate limiting and server-side or gateway trouble.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def is_transient(exc: BaseException) -> bool:
    """Connection errors, timeouts, 429 and 5xx are transient; 4xx validation errors and the rest are not."""
    if isinstance(exc, ResourceExhaustedResponse | httpx.TransportError | TimeoutError | ConnectionError):
        return True
    if isinstance(exc, ResponseHandlingException):
        return isinstance(exc.source, httpx.TransportError | TimeoutError | ConnectionError)
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in TRANSIENT_STATUSES
    return False


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """The server's Retry-After (seconds), when it sent one."""
    if isinstance(exc, ResourceExhaustedResponse):
        return float(exc.retry_after_s)
    if isinstance(exc, UnexpectedResponse) and exc.headers is not None:
        value = exc.headers.get("Retry-After")
        try:
            return max(0.0, float(value)) if value is not None else None
        except ValueError:  # an HTTP date: fall back to our own backoff
            return None
    return None


def describe_failure(exc: BaseException) -> str:
    """A one-line, secret-free account of a failed call."""
    if isinstance(exc, UnexpectedResponse):
        body = exc.content[:300].decode("utf-8", errors="replace")
        return f"HTTP {exc.status_code} {exc.reason_phrase}: {body}"
    if isinstance(exc, ResponseHandlingException):
        return f"{type(exc.source).__name__}: {exc.source}"
    return f"{type(exc).__name__}: {exc}"


def translate(exc: BaseException, what: str, attempts: int) -> StoreError:
    """Our error for a call that failed for good (a permanent fault, or transient ones past the budget)."""
    detail = describe_failure(exc)
    if is_transient(exc):
        return StoreUnavailableError(
            f"{what} failed {attempts} times with transient faults, last: {detail}. Check that Qdrant is up and "
            "reachable, or raise the retry budget (SBERT_QDRANT_RETRY_ATTEMPTS / SBERT_QDRANT_RETRY_MAX_SECONDS)."
        )
    if isinstance(exc, UnexpectedResponse) and exc.status_code == 404:
        return CollectionNotFoundError(f"{what} failed: {detail}. Create the collection first (upsert_texts does).")
    if isinstance(exc, UnexpectedResponse) and exc.status_code in (401, 403):
        return StoreError(f"{what} was refused ({detail}). Check QDRANT_API_KEY and the key's permissions.")
    return StoreError(f"{what} failed: {detail}")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded in attempts and total time; honours Retry-After."""

    attempts: int = 6
    max_seconds: float = 60.0
    initial_backoff: float = 0.2
    max_backoff: float = 10.0
    #: How a sync call waits between attempts (tests pass a recorder).
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.max_seconds <= 0 or self.initial_backoff < 0 or self.max_backoff < 0:
            raise InvalidArgumentError(
                f"{self!r} is not a usable retry policy: attempts >= 1, max_seconds > 0 and backoffs >= 0."
            )

    def wait_seconds(self, state: RetryCallState) -> float:
        """Retry-After when the server sent one (capped by the time budget), else jittered exponential backoff."""
        exc = state.outcome.exception() if state.outcome is not None else None
        hinted = retry_after_seconds(exc)
        if hinted is not None:
            return min(hinted, self.max_seconds)
        jittered = wait_random_exponential(multiplier=self.initial_backoff, max=self.max_backoff)
        return float(jittered(state))

    def _options(self, what: str) -> dict[str, Any]:
        def log_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            sleep = state.next_action.sleep if state.next_action is not None else 0.0
            logger.warning(
                "%s: attempt %d of %d failed (%s); retrying in %.2f s",
                what,
                state.attempt_number,
                self.attempts,
                describe_failure(exc) if exc is not None else "unknown",
                sleep,
            )

        return {
            "stop": stop_after_attempt(self.attempts) | stop_before_delay(self.max_seconds),
            "wait": self.wait_seconds,
            "retry": retry_if_exception(is_transient),
            "before_sleep": log_retry,
            "reraise": True,
        }

    def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` under this policy; failures come out as ``StoreError``s naming ``what``."""
        retrying = Retrying(sleep=self.sleep, **self._options(what))
        try:
            return retrying(fn, *args, **kwargs)
        except Exception as exc:
            raise translate(exc, what, retrying.statistics.get("attempt_number", 1)) from exc

    async def acall(self, what: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``call`` for coroutines."""
        retrying = AsyncRetrying(**self._options(what))
        try:
            return await retrying(fn, *args, **kwargs)
        except Exception as exc:
            raise translate(exc, what, retrying.statistics.get("attempt_number", 1)) from exc
