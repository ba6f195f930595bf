"""ImageNet classifiers laid out exactly as torchvision builds them: ResNet-18/50, MobileNetV2, VGG-16.

Layer names follow torchvision's module names (``layer1.0.conv1``, ``features.3``, ``fc``) so a
profile lines up with the PyTorch model people know. Input ``input`` float32 [batch, 3, H, W],
output ``logits`` [batch, 1000]. BatchNormalization stays a separate node, as in an unfused
export; ONNX Runtime folds it into the convolution itself.
"""

from __future__ import annotations

import math

import numpy as np

from layerperf.models.zoo._graph import GraphBuilder

NUM_CLASSES = 1000
# The last BN of each residual branch starts at gamma 0.5 instead of 1, a random-init stand-in for
# torchvision's zero_init_residual: without it the residual stream doubles in variance per block.
RESIDUAL_GAMMA = 0.5


# -- shared layers -------------------------------------------------------------------------------


def _image_input(g: GraphBuilder, batch: int, image_size: int) -> str:
    return g.input("input", "float32", [batch, 3, image_size, image_size])


def conv(
    g: GraphBuilder,
    x: str,
    name: str,
    cin: int,
    cout: int,
    k: int,
    stride: int = 1,
    groups: int = 1,
    *,
    bias: bool = False,
) -> str:
    """A k x k convolution with torchvision's "same"-style padding k // 2."""
    fan_in = cin // groups * k * k
    inputs = [x, g.he_normal(f"{name}.weight", [cout, cin // groups, k, k], fan_in)]
    if bias:
        inputs.append(g.filled(f"{name}.bias", [cout], 0.0))
    pad = k // 2
    return g.op("Conv", name, *inputs, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=groups)


def batchnorm(g: GraphBuilder, x: str, name: str, channels: int, gamma: float = 1.0) -> str:
    """Inference-mode BatchNormalization; running mean 0 / var 1 keep He-scaled activations as they are."""
    scale = g.filled(f"{name}.weight", [channels], gamma)
    shift = g.filled(f"{name}.bias", [channels], 0.0)
    mean = g.buffer(f"{name}.running_mean", np.zeros(channels, dtype=np.float32))
    var = g.buffer(f"{name}.running_var", np.ones(channels, dtype=np.float32))
    return g.op("BatchNormalization", name, x, scale, shift, mean, var, epsilon=1e-5)


def _linear(
    g: GraphBuilder, x: str, name: str, din: int, dout: int, *, gain: float = 2.0, out: str | None = None
) -> str:
    """nn.Linear as Gemm(x, W^T) + b, the way torch exports it for 2-D input.

    The weight std is sqrt(gain / din): gain 2 (He) ahead of a ReLU, 1 for the logits layer.
    """
    weight = g.normal(f"{name}.weight", [dout, din], math.sqrt(gain / din))
    bias = g.filled(f"{name}.bias", [dout], 0.0)
    return g.op_multi("Gemm", name, [x, weight, bias], [out or name], transB=1)[0]


def _pooled_logits(g: GraphBuilder, x: str, channels: int, fc_name: str) -> None:
    """Global average pool, flatten and the final Linear layer producing ``logits``."""
    pooled = g.op("GlobalAveragePool", "avgpool", x)
    flat = g.op("Flatten", "flatten", pooled, axis=1)
    _linear(g, flat, fc_name, channels, NUM_CLASSES, gain=1.0, out="logits")


# -- ResNet (torchvision v1.5: the stride sits on the bottleneck's 3x3 conv) ----------------------


def _downsample(g: GraphBuilder, x: str, prefix: str, cin: int, cout: int, stride: int) -> str:
    h = conv(g, x, f"{prefix}.downsample.0", cin, cout, 1, stride)
    return batchnorm(g, h, f"{prefix}.downsample.1", cout)


def _basic_block(g: GraphBuilder, x: str, prefix: str, cin: int, width: int, stride: int) -> tuple[str, int]:
    """ResNet-18/34 block: 3x3 -> 3x3, plus the (possibly projected) shortcut."""
    h = conv(g, x, f"{prefix}.conv1", cin, width, 3, stride)
    h = g.op("Relu", f"{prefix}.relu1", batchnorm(g, h, f"{prefix}.bn1", width))
    h = conv(g, h, f"{prefix}.conv2", width, width, 3)
    h = batchnorm(g, h, f"{prefix}.bn2", width, RESIDUAL_GAMMA)
    shortcut = x if stride == 1 and cin == width else _downsample(g, x, prefix, cin, width, stride)
    h = g.op("Add", f"{prefix}.add", h, shortcut)
    return g.op("Relu", f"{prefix}.relu2", h), width


def _bottleneck(g: GraphBuilder, x: str, prefix: str, cin: int, width: int, stride: int) -> tuple[str, int]:
    """ResNet-50 block: 1x1 reduce -> 3x3 (strided, v1.5) -> 1x1 expand by 4, plus the shortcut."""
    cout = width * 4
    h = conv(g, x, f"{prefix}.conv1", cin, width, 1)
    h = g.op("Relu", f"{prefix}.relu1", batchnorm(g, h, f"{prefix}.bn1", width))
    h = conv(g, h, f"{prefix}.conv2", width, width, 3, stride)
    h = g.op("Relu", f"{prefix}.relu2", batchnorm(g, h, f"{prefix}.bn2", width))
    h = conv(g, h, f"{prefix}.conv3", width, cout, 1)
    h = batchnorm(g, h, f"{prefix}.bn3", cout, RESIDUAL_GAMMA)
    shortcut = x if stride == 1 and cin == cout else _downsample(g, x, prefix, cin, cout, stride)
    h = g.op("Add", f"{prefix}.add", h, shortcut)
    return g.op("Relu", f"{prefix}.relu3", h), cout


def _resnet(g: GraphBuilder, batch: int, image_size: int, *, bottleneck: bool, depths: list[int]) -> None:
    x = _image_input(g, batch, image_size)
    x = conv(g, x, "conv1", 3, 64, 7, 2)
    x = g.op("Relu", "relu", batchnorm(g, x, "bn1", 64))
    x = g.op("MaxPool", "maxpool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    block = _bottleneck if bottleneck else _basic_block
    channels = 64
    for stage, (width, depth) in enumerate(zip([64, 128, 256, 512], depths, strict=True), start=1):
        for i in range(depth):
            stride = 2 if stage > 1 and i == 0 else 1
            x, channels = block(g, x, f"layer{stage}.{i}", channels, width, stride)
    _pooled_logits(g, x, channels, "fc")
    g.output("logits", "float32", [batch, NUM_CLASSES])


def build_resnet18(g: GraphBuilder, batch: int, image_size: int) -> None:
    """ResNet-18: basic blocks [2, 2, 2, 2]."""
    _resnet(g, batch, image_size, bottleneck=False, depths=[2, 2, 2, 2])


def build_resnet50(g: GraphBuilder, batch: int, image_size: int) -> None:
    """ResNet-50 v1.5: bottleneck blocks [3, 4, 6, 3]."""
    _resnet(g, batch, image_size, bottleneck=True, depths=[3, 4, 6, 3])


# -- MobileNetV2 (torchvision, width multiplier 1.0) ----------------------------------------------

# (expansion t, output channels c, repeats n, first stride s), from the MobileNetV2 paper's table 2.
_MOBILENET_V2_STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]  # fmt: skip


def _conv_bn_relu6(
    g: GraphBuilder,
    x: str,
    prefix: str,
    cin: int,
    cout: int,
    k: int,
    stride: int = 1,
    groups: int = 1,
    *,
    act: bool = True,
) -> str:
    h = conv(g, x, f"{prefix}.conv", cin, cout, k, stride, groups)
    h = batchnorm(g, h, f"{prefix}.bn", cout)
    # ReLU6 is Clip(0, 6), which is what torch exports for nn.ReLU6.
    return g.op("Clip", f"{prefix}.relu6", h, g.scalar(0.0), g.scalar(6.0)) if act else h


def _inverted_residual(g: GraphBuilder, x: str, prefix: str, cin: int, cout: int, stride: int, expand: int) -> str:
    """1x1 expand (skipped when t = 1) -> 3x3 depthwise -> linear 1x1 project, residual when shapes match."""
    hidden = cin * expand
    h = x if expand == 1 else _conv_bn_relu6(g, x, f"{prefix}.expand", cin, hidden, 1)
    h = _conv_bn_relu6(g, h, f"{prefix}.depthwise", hidden, hidden, 3, stride, groups=hidden)
    h = _conv_bn_relu6(g, h, f"{prefix}.project", hidden, cout, 1, act=False)
    return g.op("Add", f"{prefix}.add", x, h) if stride == 1 and cin == cout else h


def build_mobilenet_v2(g: GraphBuilder, batch: int, image_size: int) -> None:
    """MobileNetV2 1.0: stem, 17 inverted-residual blocks, 1x1 conv to 1280, classifier."""
    x = _conv_bn_relu6(g, _image_input(g, batch, image_size), "features.0", 3, 32, 3, 2)
    channels, index = 32, 1
    for expand, cout, repeats, first_stride in _MOBILENET_V2_STAGES:
        for i in range(repeats):
            stride = first_stride if i == 0 else 1
            x = _inverted_residual(g, x, f"features.{index}", channels, cout, stride, expand)
            channels, index = cout, index + 1
    x = _conv_bn_relu6(g, x, f"features.{index}", channels, 1280, 1)
    _pooled_logits(g, x, 1280, "classifier.1")  # classifier.0 is the Dropout, a no-op at inference
    g.output("logits", "float32", [batch, NUM_CLASSES])


# -- VGG-16 (torchvision "D" configuration, no batch norm) ----------------------------------------

_VGG16_FEATURES: list[int | str] = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
                                    512, 512, 512, "M", 512, 512, 512, "M"]  # fmt: skip


def adaptive_pool_matrix(size: int, out: int) -> np.ndarray:
    """[out, size] matrix P with P @ v == adaptive_avg_pool1d(v, out), torch's bin edges included."""
    matrix = np.zeros((out, size), dtype=np.float32)
    for i in range(out):
        start = (i * size) // out
        end = -((-(i + 1) * size) // out)  # ceil division
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


def _adaptive_avgpool(g: GraphBuilder, x: str, size: int, out: int) -> str:
    """torchvision's AdaptiveAvgPool2d((7, 7)): nothing at 224 px, otherwise rows then columns.

    Two MatMuls with constant pooling matrices cover every input size, including the
    upsampling that adaptive pooling does when the feature map is smaller than 7x7.
    """
    if size == out:
        return x
    matrix = adaptive_pool_matrix(size, out)
    rows = g.op("MatMul", "avgpool.rows", g.buffer("avgpool.row_matrix", matrix), x)
    cols = g.buffer("avgpool.col_matrix", np.ascontiguousarray(matrix.T))
    return g.op("MatMul", "avgpool.cols", rows, cols)


def _vgg_features(g: GraphBuilder, x: str, image_size: int) -> tuple[str, int]:
    """13 3x3 convs with ReLU and 5 2x2 max pools, named by their torchvision index."""
    channels, size, index = 3, image_size, 0
    for item in _VGG16_FEATURES:
        if item == "M":
            x = g.op("MaxPool", f"features.{index}", x, kernel_shape=[2, 2], strides=[2, 2])
            size, index = size // 2, index + 1
            continue
        cout = int(item)
        x = conv(g, x, f"features.{index}", channels, cout, 3, bias=True)
        x = g.op("Relu", f"features.{index + 1}", x)
        channels, index = cout, index + 2
    return x, size


def build_vgg16(g: GraphBuilder, batch: int, image_size: int) -> None:
    """VGG-16: 13 convs, adaptive avgpool to 7x7, then 4096-4096-1000 fully connected layers."""
    x, size = _vgg_features(g, _image_input(g, batch, image_size), image_size)
    x = _adaptive_avgpool(g, x, size, 7)
    x = g.op("Flatten", "flatten", x, axis=1)
    x = g.op("Relu", "classifier.1", _linear(g, x, "classifier.0", 512 * 7 * 7, 4096))
    x = g.op("Relu", "classifier.4", _linear(g, x, "classifier.3", 4096, 4096))  # .2/.5 are Dropouts
    _linear(g, x, "classifier.6", 4096, NUM_CLASSES, gain=1.0, out="logits")
    g.output("logits", "float32", [batch, NUM_CLASSES])
