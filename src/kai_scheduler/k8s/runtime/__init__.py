"""The live edge shared by every component: API client, informers, leader election, events, HTTP server,
the one work queue, backoff and wait helper, typed object accessors.
"""
