"""medvqa_build: raw public medical image datasets -> validated, reproducible VQA benchmarks."""

__version__ = "0.1.0"
