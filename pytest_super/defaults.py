"""The defaults of the run's limits, each written once.

The settings table (settings/table.py `SETTINGS`) declares every `--super-*` option with one of
these as its default; the lower layers (runner.py's `EpisodeSettings`, environment.py's
`EpisodeLimits` and `AgentOptions`) name the same constants for values built in Python without the
table (a test's `EpisodeSettings()`), so no number here stands anywhere else.
"""

from __future__ import annotations

from typing import Literal

#: --super-cell-timeout: seconds one cell may run (the reference's 300 s)
CELL_TIMEOUT_S = 300.0
#: --super-compute-limit: seconds of summed cell time per task, prefix cells included
COMPUTE_LIMIT_S = 1800.0
#: --super-steps: actions per episode
STEPS = 100
#: --super-attempts: Reflexion's attempts
ATTEMPTS = 3
#: --super-disk: SUPER's heaviest setups (torch with CUDA wheels, datasets, checkpoints) write a
#: few GiB; 20 GiB leaves room and still stops a runaway writer long before a disk fills
DISK = "20g"
#: --super-mem: a kernel's memory limit (swap none beyond it)
MEM = "4g"
#: --super-cpus: a kernel's CPUs (at most the engine's)
CPUS = 2.0
#: --super-network: a kernel's network, "bridge" (the internet, for pip and downloads) or "none"
NETWORK: Literal["bridge", "none"] = "bridge"
