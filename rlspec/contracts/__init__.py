"""Runtime half of every contract: constants, documented defaults, validators, converters.

``rlspec.contracts.<id>`` imports only torch and numpy (never Hypothesis or pytest), so reference/,
fast/ and the engines built on them can use it. The test half of the same contract — clauses,
Hypothesis strategies, properties — lives in ``rlspec.spec.<id>`` and imports this module.
"""
