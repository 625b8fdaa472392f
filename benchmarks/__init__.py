"""Performance benchmarks: `make bench` or `python -m benchmarks [name ...]`; results in benchmarks/results/."""
