"""``python -m tests.canaries``: see tests/canaries/runner.py."""

import sys

from tests.canaries.runner import main

sys.exit(main())
