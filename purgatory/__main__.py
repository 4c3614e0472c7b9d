import sys

from purgatory.cli import main

sys.exit(main())
