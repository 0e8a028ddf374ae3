"""The exit classifier and the retry rule (pure: no store, no executor)."""

import pytest

from andreas.manager.exits import ExitKind, classify_exit, retry
from andreas.store.models import JobState


def classify(code, *, oom=False, requested=False, failures=0, max_retries=3):
    return classify_exit(code, oom_killed=oom, stop_requested=requested, failures=failures,
                         max_retries=max_retries)


def test_exit_zero_completes():
    out = classify(0)
    assert (out.kind, out.state, out.reason, out.retry) == (
        ExitKind.COMPLETED, JobState.COMPLETED, "completed", None)


@pytest.mark.parametrize("code", [143, 137])
def test_a_signal_is_resumable(code):
    out = classify(code)
    assert (out.kind, out.state) == (ExitKind.RESUMABLE, JobState.PREEMPTED)
    assert out.reason == f"stopped by a signal (exit {code})"
    assert out.retry is None


def test_any_exit_after_a_stop_request_is_resumable():
    out = classify(1, requested=True, oom=True)
    assert out.kind is ExitKind.RESUMABLE
    assert out.reason == "stopped on request (exit 1)"


def test_oom_kill_is_a_failure_even_with_137():
    out = classify(137, oom=True, failures=1)
    assert out.kind is ExitKind.FAILED
    assert out.reason == "exit 137 (out of memory)"
    assert out.retry is not None and out.retry.failures == 2


def test_failure_is_retried_until_the_limit():
    assert classify(1, failures=2, max_retries=3).state is JobState.PREEMPTED
    last = classify(1, failures=3, max_retries=3)
    assert last.state is JobState.FAILED and last.retry.final


def test_retry_rule():
    assert retry(0, 0).final and retry(0, 0).state is JobState.FAILED
    counted = retry(1, 2)
    assert (counted.failures, counted.final, counted.state) == (2, False, JobState.PREEMPTED)
