"""teenygrad: a small deep-learning framework, built one chapter at a time.

Chapter 1 uses only `teenygrad.datasets`; chapter 2 adds the Tensor (`teenygrad.tensor`), chapter 3 the
kernels it runs on (`teenygrad.kernels`); later chapters add autograd and nn.
"""
from teenygrad import datasets, kernels
from teenygrad.tensor import (Tensor, arange, cat, cross_entropy, float32, float64, full, int64, manual_seed, ones,
                              rand, randn, stack, tensor, zeros)
from teenygrad import autograd  # noqa: E402 - after tensor, which it extends
from teenygrad.autograd import is_grad_enabled, no_grad, unbroadcast
from teenygrad.gradcheck import gradcheck

__all__ = ["datasets", "kernels", "Tensor", "tensor", "zeros", "ones", "full", "arange", "rand", "randn",
           "manual_seed", "cat", "stack", "float32", "float64", "int64",
           "autograd", "no_grad", "is_grad_enabled", "unbroadcast", "gradcheck", "cross_entropy"]

# Chapter 5: autograd on scalars (teenygrad.value, teenygrad.value_nn) and compiling it to a tape (teenygrad.tape)
from teenygrad import tape, value, value_nn  # noqa: E402
from teenygrad.value import Value  # noqa: E402

__all__ += ["tape", "value", "value_nn", "Value"]

# Chapter 7: layers and modules (teenygrad.nn, over teenygrad.functional) and optimizers (teenygrad.optim)
from teenygrad import functional, nn, optim  # noqa: E402

__all__ += ["functional", "nn", "optim"]

# Chapters 8 and 9: characters as tokens (teenygrad.text) and the GPT (teenygrad.gpt)
from teenygrad import gpt, text  # noqa: E402

__all__ += ["gpt", "text"]
