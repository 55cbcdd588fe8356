"""`python -m rlspec.golden_bridge [OUT_DIR]`: regenerate every golden fixture and fixtures/MANIFEST.json.

Run by `nox -s fixtures` (which installs the pinned third-party packages); OUT_DIR defaults to
<repo>/fixtures.
"""

import sys
from pathlib import Path

from rlspec.golden_bridge import (
                                  omnisafe_lagrange,
                                  omnisafe_ppo_lag,
                                  omnisafe_trust_region,
                                  rlax_returns,
                                  room_rom,
                                  sb3_rollout_buffer,
                                  sb3_running_mean_std,
                                  sheeprl_behavior,
                                  sheeprl_dreamer_v3,
                                  sheeprl_returns,
                                  sheeprl_rssm,
                                  sheeprl_world_model,
)
from rlspec.golden_bridge.fixture_io import FIXTURES_DIR
from rlspec.golden_bridge.manifest import write_all

GENERATORS = [*sheeprl_dreamer_v3.GENERATORS, *sheeprl_returns.GENERATORS, *omnisafe_lagrange.GENERATORS,
              *sb3_running_mean_std.GENERATORS, *sb3_rollout_buffer.GENERATORS, *rlax_returns.GENERATORS,
              *omnisafe_trust_region.GENERATORS, *sheeprl_behavior.GENERATORS, *sheeprl_rssm.GENERATORS,
              *sheeprl_world_model.GENERATORS, *omnisafe_ppo_lag.GENERATORS]

root = Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES_DIR
write_all(GENERATORS, root, room_rom.ARTIFACTS)  # artifacts: built by the project (nox -s rom), described
print(f"wrote {len(GENERATORS)} fixtures and {root / 'MANIFEST.json'}")
