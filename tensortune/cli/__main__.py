"""``python -m tensortune.cli``: the same command line as ``python -m tensortune``."""

from . import main

raise SystemExit(main())
