"""The `numa` plugin (opt-in): NUMA-aware placement from NodeResourceTopology objects (see `plugin`)."""

from kai_scheduler.plugins.numa.plugin import NumaPlugin

__all__ = ["NumaPlugin"]
