"""`python -m helpers PARAMS [--only NN] [--from NN] [--check] [-p key=value]`: the notebook sequence (helpers.experiment.runner)."""

import sys

from helpers.experiment.runner import main

sys.exit(main())
