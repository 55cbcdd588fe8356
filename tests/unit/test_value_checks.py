"""``rlspec.contracts.validate.without_value_checks``: inside it the validators skip the checks that read
tensor values back to the host (the fast engines' device hot loops), never the type and shape checks; outside
it, and after it (also when the block raised), every check runs again."""

from __future__ import annotations

import pytest
import torch

from rlspec.contracts.rssm import require_action_ids
from rlspec.contracts.validate import require_finite, value_checks_on, values_look_valid, without_value_checks
from rlspec.spec.core import no_host_sync

NAN = torch.tensor([0.0, float("nan")])
IDS = torch.tensor([[0, 5]])  # 5 is out of range for 3 actions


def test_value_checks_are_on_by_default_and_name_the_culprit():
    assert value_checks_on()
    with pytest.raises(ValueError, match=r"f: argument 'x' has 1 NaN|non-finite"):
        require_finite("f", "x", NAN)
    assert not values_look_valid(finite=(NAN,))
    with pytest.raises(ValueError, match=r"ids in \[0, 5\], expected ids in \[0, 3\)"):
        require_action_ids("f", "action", IDS, (1, 2), 3)


def test_inside_the_block_values_are_not_read_but_shapes_and_types_are_checked():
    with without_value_checks(), no_host_sync():
        assert not value_checks_on()
        require_finite("f", "x", NAN)
        assert values_look_valid(finite=(NAN,))
        require_action_ids("f", "action", IDS, (1, 2), 3)
        with pytest.raises(ValueError, match=r"argument 'action' has shape \(1, 2\), expected \(2, 1\)"):
            require_action_ids("f", "action", IDS, (2, 1), 3)
        with pytest.raises(TypeError, match="integer action ids"):
            require_action_ids("f", "action", IDS.float(), (1, 2), 3)


def test_checks_come_back_after_the_block_even_when_it_raised():
    with pytest.raises(RuntimeError), without_value_checks():
        raise RuntimeError("inside")
    assert value_checks_on()
    with pytest.raises(ValueError):
        require_finite("f", "x", NAN)
