"""How allocate's walk words why a job did not fit (shared by the walk and its replay, `walk_replay`)."""

from __future__ import annotations

from kai_scheduler.api.reasons import code_of, with_code
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskInfo, TaskStatus

# What a job whose attempt its queue refused without a reason (no pods to try) is quoted as.
UNSAID = "it did not fit"


def does_not_fit(session: Session, task: TaskInfo, tasks: list[TaskInfo]) -> str:
    """Why an attempt of `tasks` failed when `task` found no node, the others placed so far."""
    return no_fit_words(task, tasks, session.explain_no_fit(task))


def no_fit_words(task: TaskInfo, tasks: list[TaskInfo], detail: str) -> str:
    """`does_not_fit`, `task`'s explanation (`Session.explain_no_fit`) given."""
    return no_fit_after(no_fit_head(task, tasks), detail)


def no_fit_head(task: TaskInfo, tasks: list[TaskInfo]) -> str:
    """The words of `does_not_fit` before the explanation."""
    if len(tasks) == 1:
        return f"pod {task.name} does not fit: "
    done = sum(1 for t in tasks if t.status in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED))
    return f"gang of {len(tasks)} pods: {done} placed, then pod {task.name} does not fit: "


def no_fit_after(head: str, detail: str) -> str:
    """`does_not_fit` from its head (`no_fit_head`) and the explanation."""
    # A pre-predicate's code (a queue's rule no node cures) stays with the job's reason; a plain string's
    # is the generic one (`with_code`).
    return head + detail if type(detail) is str else with_code(head + detail, code_of(detail))


def failed_like(first: str, why: str) -> str:
    """Why a job did not fit that failed as `first`, the first job of its shape, did (`why`)."""
    text = f"a job of the same shape, {first}, could not be scheduled in this cycle: {why}"
    return text if type(why) is str else with_code(text, code_of(why))
