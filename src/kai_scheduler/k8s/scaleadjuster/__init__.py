"""The node scale adjuster (KAI's pkg/nodescaleadjuster): scaling pods for cluster autoscalers."""
