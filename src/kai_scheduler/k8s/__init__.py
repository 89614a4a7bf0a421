"""The live edge: one package per component over a shared runtime; components.py runs them
(`kai-scheduler run`)."""
