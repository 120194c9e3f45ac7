"""``python -m tensortune``: the command line (see tensortune.cli)."""

from .cli import main

raise SystemExit(main())
