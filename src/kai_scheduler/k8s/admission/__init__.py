"""The admission webhooks (KAI's pkg/admission): review logic, and the TLS server that serves it."""
