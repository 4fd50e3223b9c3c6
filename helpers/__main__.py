"""`python -m helpers PARAMS [--only NN] [--from NN] [--check] [-p key=value]`: the notebook sequence
(helpers.experiment.run.runner)."""

import sys

from helpers.experiment.run.runner import main

sys.exit(main())
