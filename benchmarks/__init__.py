"""Performance benchmarks: `make bench` or `python -m benchmarks [name ...]`.

Results land in benchmarks/results/<name>.json."""
