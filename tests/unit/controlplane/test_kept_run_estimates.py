"""Run estimates kept from cycle to cycle (`controlplane.kept_run_estimates`, both edges): each cycle gets
exactly what the rule makes of the pods then, and a pod's run is worked out again only when what it reads
changed."""

from __future__ import annotations

from helpers import pod
from kai_scheduler.api.objects import Pod
from kai_scheduler.controlplane.kept_run_estimates import KeptRunEstimates, RunLog
from kai_scheduler.controlplane.run_times import PodRun, pod_run, run_estimates, shape_of

BEGUN = 7.3  # when the running pods began (an awkward float: the sums must be the rule's own)


def test_each_cycle_gets_the_rules_estimates_and_only_changed_pods_are_worked_out() -> None:
    history = RunLog()
    pods: dict[str, tuple[Pod, bool]] = {
        p.key: (p, on_node)
        for p, on_node in [
            (pod("known", "q", gpus=1, duration="600s"), True),
            (pod("guessed", "q", gpus=2), True),  # no duration: the history's
            (pod("waiting", "q", gpus=2), False),
            (pod("next", "q", gpus=1, duration="90s"), False),
        ]
    }
    worked: list[str] = []

    def work_out(key: str, last: PodRun | None) -> PodRun:
        worked.append(key)
        one, on_node = pods[key]
        return pod_run(one, None, history, on_node=on_node, begun=BEGUN if on_node else None)

    kept = KeptRunEstimates(history)

    def cycle(now: float) -> None:
        got = kept.at(((key, entry) for key, entry in pods.items()), work_out, now)
        made = run_estimates(pods.values(), {}, dict.fromkeys(pods, BEGUN), history, now)
        assert got == made  # exactly: the same floats, the same time of change

    cycle(100.1)
    assert sorted(worked) == sorted(pods)
    worked.clear()
    cycle(200.7)
    assert worked == []  # nothing changed: nothing parsed, no shape made

    history.add("done", shape_of(pod("x", "q", gpus=2), None), 300.0)
    cycle(250.3)
    assert sorted(worked) == ["default/guessed", "default/waiting"]  # only those the history gives
    worked.clear()
    cycle(400.0)  # "guessed" outran its estimate: no expected end, by the clock alone
    assert worked == []

    pods["default/next"] = (pod("next", "q", gpus=1, duration="30s"), True)  # placed, and edited
    cycle(401.0)
    assert worked == ["default/next"]
