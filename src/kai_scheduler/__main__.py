from kai_scheduler.cli import program

raise SystemExit(program())
