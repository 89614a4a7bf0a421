"""The binder (KAI's pkg/binder and pkg/resourcereservation): BindRequests to bindings, GPU reservation
pods, shared-GPU environment wiring, DRA claims, and the reservation app.
"""
