"""SB3's own PPO on the bonus engine's Meta-World work (nox -s bench_sb3_metaworld)."""
