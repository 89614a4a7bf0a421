"""What the pre-predicates and the pod readers read of the session besides the pod
(`Session.pod_answers_key`): the same while the storage objects and the pool's largest node stay and no
pod with inter-pod rules runs, different as soon as one of them changes, and not known while a
pre-predicate does not say."""

from __future__ import annotations

from helpers import node, open_session, pod, queue, snapshot_of
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework.same_object import Same


def objects(*extra: ApiObject) -> list[ApiObject]:
    return [node("n0", gpus=4), node("n1", gpus=8), queue("q"), pod("a", "q", gpus=1), *extra]


def test_the_key_stays_while_what_it_reads_stays() -> None:
    snapshot = snapshot_of(objects())
    first = open_session(snapshot).pod_answers_key()
    assert first is not None
    assert open_session(snapshot).pod_answers_key() == first  # the same storage object, the same nodes


def test_the_key_moves_with_the_storage_object_the_largest_node_and_inter_pod_rules() -> None:
    key = open_session(snapshot_of(objects())).pod_answers_key()
    # Another snapshot holds other (equal) storage objects: they are not told equal by content.
    assert open_session(snapshot_of(objects())).pod_answers_key() != key
    bigger = snapshot_of([node("n0", gpus=4), node("n1", gpus=16), queue("q"), pod("a", "q", gpus=1)])
    bigger_key = open_session(bigger).pod_answers_key()
    assert key is not None and bigger_key is not None
    # The pre-filter's part past the storage objects: the pool's largest node.
    assert bigger_key[0][1:] != key[0][1:]
    rule = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    ruled = snapshot_of(objects(pod("r", "q", gpus=1, node_name="n0", affinity=rule)))
    plain = snapshot_of(objects(pod("r", "q", gpus=1, node_name="n0")))
    ruled_key, plain_key = open_session(ruled).pod_answers_key(), open_session(plain).pod_answers_key()
    assert ruled_key is not None and plain_key is not None
    assert (ruled_key[0][1:], ruled_key[1]) == (plain_key[0][1:], True) and plain_key[1] is False


def test_a_pre_predicate_that_does_not_say_leaves_the_key_unknown() -> None:
    session = open_session(snapshot_of(objects()))
    session.points.pre_predicates.append(lambda task: None)
    assert session.pod_answers_key() is None


def test_same_tells_objects_apart_by_identity() -> None:
    held: list[int] = [1]
    assert Same(held) == Same(held) and hash(Same(held)) == hash(Same(held))
    assert Same(held) != Same([1]) and Same(held) != held
