"""`python -m bench.throughput`: see bench.throughput.run."""

import sys

from bench.throughput.run import main

sys.exit(main())
