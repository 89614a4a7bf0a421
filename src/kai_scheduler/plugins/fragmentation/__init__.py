"""Fragmentation-aware GPU placement (`gpufragmentation`); see `plugin`."""

from kai_scheduler.plugins.fragmentation.plugin import GpuFragmentationPlugin

__all__ = ["GpuFragmentationPlugin"]
