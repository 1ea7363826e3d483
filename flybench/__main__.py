import sys

from flybench.cli import main

sys.exit(main())
