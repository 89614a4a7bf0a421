from kai_scheduler.cli import program

# Guarded: a process pool that spawns its workers (sim.variants) imports this module again in each.
if __name__ == "__main__":
    raise SystemExit(program())
