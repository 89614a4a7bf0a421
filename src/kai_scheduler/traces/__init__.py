"""Public cluster traces as manifests for `kai-scheduler simulate` (`kai-scheduler trace import`).

One module per trace format turns its rows into jobs (`rows.TraceJob`: pods with arrivals and
durations); `queues` assigns them to queues, `manifests` writes the Kubernetes objects, `output` the
YAML, and `command` is the CLI. See docs/traces.md for every mapping and rule.
"""
