"""teenygrad: a small deep-learning framework, built one chapter at a time.

Chapter 1 uses only `teenygrad.datasets`; later chapters add the tensor, its kernels, autograd and nn.
"""
from teenygrad import datasets

__all__ = ["datasets"]
