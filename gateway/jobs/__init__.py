"""Background work: the review after replies, extraction when sessions end or go quiet.

`BackgroundWork` asks for both (and the quiet-time sweep) as jobs in the stores'
`JobQueue`, claimed once across replicas, and runs what it claims on the
application's `Scheduler`; jobs receive a `JobContext` (stores, the auxiliary
model, `BackgroundSettings`), never the application.
"""

from gateway.jobs.background import BackgroundWork
from gateway.jobs.context import BackgroundSettings, JobContext, SessionEnder
from gateway.jobs.extraction import extract_session
from gateway.jobs.learning import LearningTools, summary_line
from gateway.jobs.review import ReviewRequest, review_session

__all__ = [
    "BackgroundSettings",
    "BackgroundWork",
    "JobContext",
    "LearningTools",
    "ReviewRequest",
    "SessionEnder",
    "extract_session",
    "review_session",
    "summary_line",
]
