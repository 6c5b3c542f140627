import sys

from trainer.synthesis.cli import main

sys.exit(main())
