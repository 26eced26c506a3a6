import sys

from mlerl.cli import main

sys.exit(main())
