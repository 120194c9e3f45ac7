"""Operator library: common tensor ops written in the DSL, one module per family.

Every op takes Tensors and returns the Tensor of its last compute stage; stages carry readable
names (they reach generated C) and a ``tag`` naming their family for schedulers.
"""

from .conv import conv2d, depthwise_conv2d
from .elementwise import add, bias_add, clip, div, gelu, mul, relu, sigmoid, sub, tanh
from .linalg import batch_matmul, dense, matmul
from .nn import layer_norm, softmax
from .pool import avg_pool2d, global_avg_pool, max_pool2d
from .reduction import reduce_max, reduce_mean, reduce_min, reduce_sum
from .transform import concat, pad, reshape, transpose

__all__ = [
    "add",
    "avg_pool2d",
    "batch_matmul",
    "bias_add",
    "clip",
    "concat",
    "conv2d",
    "dense",
    "depthwise_conv2d",
    "div",
    "gelu",
    "global_avg_pool",
    "layer_norm",
    "matmul",
    "max_pool2d",
    "mul",
    "pad",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_sum",
    "relu",
    "reshape",
    "sigmoid",
    "softmax",
    "sub",
    "tanh",
    "transpose",
]
