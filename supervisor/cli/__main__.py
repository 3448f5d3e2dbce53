"""``python -m supervisor.cli``: the same as the ``mcp-supervisor`` command."""

import sys

from supervisor.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
