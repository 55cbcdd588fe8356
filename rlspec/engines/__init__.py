"""Execution and IO: where and when train/policy steps run (a deterministic CPU loop; CUDA actor/learner
streams; subprocess/distributed/Ray workers). Imports algos, models, envs and runs."""
