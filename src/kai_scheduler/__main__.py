from kai_scheduler.cli import main

raise SystemExit(main())
