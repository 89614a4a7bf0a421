"""How allocate's replay words a leaf's reasons (`actions.walk_replay._words`): written again from the last
writing, only the reasons whose text moved are worded again, and the reasons (values and key order) are
those of a writing afresh."""

from __future__ import annotations

from helpers import node, pod, queue, snapshot_of
from kai_scheduler.actions import walk_replay
from kai_scheduler.actions.walk_reasons import failed_like, no_fit_after
from kai_scheduler.framework.quiet_walk import NO_NODE, REFUSED, FirstPod, LeafOutcome
from kai_scheduler.model.jobs import TaskInfo

SHAPE = 0  # the one pod shape of the leaf's NO_NODE job


def a_task() -> TaskInfo:
    snapshot = snapshot_of([node("n0", gpus=1), queue("q"), pod("a", "q", gpus=2)])
    job = next(iter(snapshot.jobs.values()))
    return job.tasks[0]


def leaf(refusal: str | None) -> LeafOutcome:
    """A leaf of three first jobs, each with followers: `no-node` (its pod finds no node), `refused` (its
    queue refuses it: "over quota") and `unsaid` (refused with `refusal`; None: nothing said, so it has no
    reason of its own and its followers quote the session's)."""
    task = a_task()
    keys = ["no-node", "nf-1", "nf-2", "refused", "rf-1", "unsaid", "uf-1"]
    parts = [NO_NODE, 0, 0, REFUSED, 3, REFUSED, 5]
    first = FirstPod(task, [task], SHAPE, "pod a does not fit: ")
    return LeafOutcome(
        jobs=[],
        capacity=(),
        order=list(range(len(keys))),
        keys=keys,
        parts=parts,
        firsts=[0, 3, 5],
        first_keys=["no-node", "refused", "unsaid"],
        followers=[["nf-1", "nf-2"], ["rf-1"], ["uf-1"]],
        refusals=[None, None, None, "over quota", None, refusal, None],
        first_pods=[first, None, None, None, None, None, None],
        shapes=[0] * len(keys),
        written=[None] * len(keys),
        written_from=[None] * len(keys),
        leaf_words=None,
        leaf_words_from=None,
        answers=[(None, False), None, None, None, None, None, None],
        answers_key=None,
    )


def afresh(detail: str, unsaid: str | None, earlier: dict[str, str]) -> dict[str, str]:
    """The reasons a writing afresh gives `leaf(unsaid)`, in its order."""
    no_node = no_fit_after("pod a does not fit: ", detail)
    words = {"no-node": no_node, "nf-1": failed_like("no-node", no_node)}
    words["nf-2"] = words["nf-1"]
    words |= {"refused": "over quota", "rf-1": failed_like("refused", "over quota")}
    if unsaid is not None:
        words["unsaid"] = unsaid
    words["uf-1"] = failed_like("unsaid", unsaid if unsaid is not None else earlier["unsaid"])
    return words


def written(outcome: LeafOutcome, detail: str, earlier: dict[str, str]) -> dict[str, str]:
    return walk_replay._words([outcome], [{SHAPE: detail}], [None], earlier)[0]


def test_a_leaf_written_again_words_again_only_the_reasons_whose_text_moved() -> None:
    earlier = {"unsaid": "its own reason"}
    outcome = leaf(None)
    first = written(outcome, "3 Insufficient GPUs", earlier)
    assert list(first.items()) == list(afresh("3 Insufficient GPUs", None, earlier).items())
    # A cordon moves the explanation: the NO_NODE job's reasons change, the refused jobs' stay.
    again = written(outcome, "1 node(s) were unschedulable, 2 Insufficient GPUs", earlier)
    fresh = afresh("1 node(s) were unschedulable, 2 Insufficient GPUs", None, earlier)
    assert list(again.items()) == list(fresh.items())
    assert again["rf-1"] is first["rf-1"]  # (kept, not worded again)
    assert again["nf-1"] != first["nf-1"]
    assert first == afresh("3 Insufficient GPUs", None, earlier)  # (the last writing is not changed)


def test_a_reason_quoting_the_sessions_is_worded_again_when_the_session_says_otherwise() -> None:
    outcome = leaf(None)
    written(outcome, "3 Insufficient GPUs", {"unsaid": "its own reason"})
    earlier = {"unsaid": "another reason"}
    again = written(outcome, "3 Insufficient GPUs", earlier)
    assert list(again.items()) == list(afresh("3 Insufficient GPUs", None, earlier).items())


def test_a_first_job_that_comes_to_have_its_own_reason_is_written_in_the_order_of_a_writing_afresh() -> None:
    earlier = {"unsaid": "its own reason"}
    outcome = leaf(None)
    written(outcome, "3 Insufficient GPUs", earlier)
    outcome.refusals[5] = "over its limit"  # (the queue's checks, asked again, now say why)
    again = written(outcome, "3 Insufficient GPUs", earlier)
    assert list(again.items()) == list(afresh("3 Insufficient GPUs", "over its limit", earlier).items())
