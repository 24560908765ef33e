"""What a configuration costs before it runs: counted FLOPs, each row's parameters, device speeds, the plan."""
