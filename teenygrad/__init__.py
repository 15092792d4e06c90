"""teenygrad: a small deep-learning framework, built one chapter at a time.

Importing it changes nothing in your process (no environment variable, no allocator setting); for training
speed call `teenygrad.tune()` first (see `teenygrad.tuning`). Each chapter's modules:

    1  datasets, regression                 the book's data sets, with their credits; fitting a linear model
    2  tensor, tensor_views, ops            the Tensor, its views, and the op layer that runs every op
    3  kernels                              numba kernels and their registry (`kernels.use`, `kernels.kernel`)
    4  classification, preprocessing        one-hot labels, accuracy, bag of words, feature scaling
    5  value, value_nn, tape, tape_fuse     autograd on scalars, and compiling it to a tape
    6  autograd, gradcheck                  autograd on tensors: the engine (rules live in `ops`)
    7  nn, nn_init, functional, optim       layers, initialisation, optimizers
    8  text                                 characters as tokens, sampling
    9  gpt, value_gpt, tuning               the GPT, fused ops (`ops.fused`), process settings for speed
    10 compiler/, tracing                   `compile`: a step captured as a graph of primitives, rewritten,
                                            fused and generated as numba code (`compiler/__init__` draws the
                                            pipeline); `tracing`, the flag the op layer reads, stays outside
    11 devices                              where a tensor's numbers live: "cpu" (numpy) or "cuda" (numba-cuda,
                                            a GPU or its simulator); the GPU's kernels are `kernels.cuda`
    *  edition, grading, _swap, old_paths   the exercises' pieces and the learner's; the hidden tests' `report`;
                                            swapping a table's entries for a block; module paths from before
                                            the compiler was one package (a learner's older mine/ files)
"""
import os as _os

from teenygrad import datasets, devices, kernels, regression
from teenygrad.tensor import (Tensor, arange, cat, cross_entropy, default_generator, float32, float64, full, int64,
                              manual_seed, ones, rand, randn, stack, tensor, zeros)
from teenygrad import ops
from teenygrad import autograd
from teenygrad.autograd import is_grad_enabled, no_grad
from teenygrad.ops.movement import unbroadcast
from teenygrad import classification, preprocessing
from teenygrad.gradcheck import gradcheck
from teenygrad import tape, tape_fuse, value, value_nn
from teenygrad.value import Value
from teenygrad import functional, nn, nn_init, optim
from teenygrad import text
from teenygrad import gpt, tuning, value_gpt
from teenygrad.tuning import tune
from teenygrad import compiler, old_paths, tracing
from teenygrad.compiler import CaptureError, compile  # noqa: F401 - tg.compile, not in __all__ (see below)
from teenygrad import edition
from teenygrad.edition import exercise

old_paths.install()  # a learner's mine/ files recorded before the compiler was one package still import
if _os.environ.get(edition.EDITION_ENV) == "mine":  # opted in: the learner's pieces from mine/ replace the book's
    edition.load_mine()

__all__ = [
    # chapter 1
    "datasets", "regression",
    # chapter 2: the Tensor and its ops
    "Tensor", "tensor", "zeros", "ones", "full", "arange", "rand", "randn", "manual_seed", "default_generator", "cat",
    "stack", "cross_entropy", "float32", "float64", "int64", "ops",
    # chapter 3
    "kernels",
    # chapter 4
    "classification", "preprocessing",
    # chapter 5
    "Value", "value", "value_nn", "tape", "tape_fuse",
    # chapter 6
    "autograd", "no_grad", "is_grad_enabled", "unbroadcast", "gradcheck",
    # chapter 7
    "functional", "nn", "nn_init", "optim",
    # chapter 8
    "text",
    # chapter 9
    "gpt", "value_gpt", "tuning", "tune",
    # chapter 10 (`teenygrad.compile` too, left out of __all__ so `import *` never hides Python's compile)
    "compiler", "tracing", "CaptureError",
    # chapter 11
    "devices",
    # every exercise
    "edition", "exercise",
]
