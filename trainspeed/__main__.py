import sys

from trainspeed.cli import main

sys.exit(main())
