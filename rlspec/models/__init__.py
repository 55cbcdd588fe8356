"""Networks (RSSM, encoders, heads, actor/critic, policy/value nets). Imports contracts, reference/ and
fast/ only; never algos, engines or the CLI."""
