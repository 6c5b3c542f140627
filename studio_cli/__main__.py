import sys

from studio_cli.main import main

sys.exit(main())
