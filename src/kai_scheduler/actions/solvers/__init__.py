"""The victim solver that reclaim, preempt and consolidation share (KAI's `actions/common/solvers/`).

`victims` is the loop the three actions run over pending jobs; `victim_order` hands out victims,
`victim_search` chooses and commits a scenario, `victim_scenarios` simulates one (with `replays` keeping
what a victim set's re-placement did), `gang_eviction` picks which of a victim job's pods go, and
`search_budget` bounds how long the search looks. It uses the placement and job queue that allocate
also uses, never an action itself.
"""
