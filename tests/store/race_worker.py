"""A process of the job race test (imported by spawned processes, not collected by pytest)."""

from __future__ import annotations


def race(url: str, job_ids: list[str], barrier, results) -> None:
    """For each job: wait for every worker, then try queued -> running; report the outcome."""
    from andreas.store import JobState, TransitionConflict, open_store, transition

    store = open_store(url)
    try:
        for job_id in job_ids:
            barrier.wait(timeout=60)
            try:
                with store.session() as s:
                    transition(s, job_id, JobState.RUNNING, expected=JobState.QUEUED)
                results.put((job_id, "won"))
            except TransitionConflict:
                results.put((job_id, "conflict"))
            except Exception as e:  # noqa: BLE001 - the test reports it
                results.put((job_id, f"error: {type(e).__name__}: {e}"))
    finally:
        store.dispose()
