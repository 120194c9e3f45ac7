"""Convolutional networks' layers, network by network (sources: `layer_specs`)."""

from __future__ import annotations

from collections.abc import Callable

from .layer_specs import Rows, conv, dense, dw, ln, pool


def _resnet50() -> Rows:
    rows = [
        ("conv1", conv(3, 224, 64, 7, 2, 3)),
        ("maxpool", pool(64, 112, 3, 2, 1)),
    ]
    # torchvision's Bottleneck (v1.5: the stride sits on the 3x3 conv)
    cin, h = 64, 56
    for stage, (width, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2)), 1):
        out = h // stride
        rows += [
            (f"layer{stage}.0.conv1", conv(cin, h, width, 1)),
            (f"layer{stage}.0.conv2", conv(width, h, width, 3, stride, 1)),
            (f"layer{stage}.0.conv3", conv(width, out, 4 * width, 1)),
            (f"layer{stage}.0.downsample.0", conv(cin, h, 4 * width, 1, stride)),
            (f"layer{stage}.1.conv1", conv(4 * width, out, width, 1)),
            (f"layer{stage}.1.conv2", conv(width, out, width, 3, 1, 1)),
        ]
        cin, h = 4 * width, out
    return [*rows, ("fc", dense(1, 1000, 2048))]


def _resnext50() -> Rows:
    rows = []
    cin, h = 64, 56
    for stage, (width, stride) in enumerate(((128, 1), (256, 2), (512, 2), (1024, 2)), 1):
        out, planes = h // stride, width // 2
        rows += [
            (f"layer{stage}.0.conv1", conv(cin, h, width, 1)),
            (f"layer{stage}.0.conv2", conv(width, h, width, 3, stride, 1, groups=32)),
            (f"layer{stage}.0.conv3", conv(width, out, 4 * planes, 1)),
            (f"layer{stage}.1.conv2", conv(width, out, width, 3, 1, 1, groups=32)),
        ]
        cin, h = 4 * planes, out
    return rows


def _mobilenet_v2() -> Rows:
    rows = [
        ("features.0.0", conv(3, 224, 32, 3, 2, 1)),
        ("features.1.conv.0.0", dw(32, 112, 3)),
        ("features.1.conv.1", conv(32, 112, 16, 1)),
    ]
    # (expansion t, out channels c, repeats n, first stride s), torchvision's table
    cin, h, index = 16, 112, 2
    for t, c, n, s in ((6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2)):
        for i in range(min(n, 2)):
            stride = s if i == 0 else 1
            hidden, out = cin * t, h // stride
            rows += [
                (f"features.{index + i}.conv.0.0", conv(cin, h, hidden, 1)),
                (f"features.{index + i}.conv.1.0", dw(hidden, h, 3, stride)),
                (f"features.{index + i}.conv.2", conv(hidden, out, c, 1)),
            ]
            cin, h = c, out
        index += n
    return [
        *rows,
        ("features.17.conv.2", conv(960, 7, 320, 1)),
        ("features.18.0", conv(320, 7, 1280, 1)),
        ("classifier.1", dense(1, 1000, 1280)),
    ]


def _efficientnet_b0() -> Rows:
    rows = [
        ("features.0.0", conv(3, 224, 32, 3, 2, 1)),
        ("features.1.0.block.0.0", dw(32, 112, 3)),
        ("features.1.0.block.1.fc1", conv(32, 1, 8, 1)),
        ("features.1.0.block.2.0", conv(32, 112, 16, 1)),
    ]
    # (kernel, first stride, out channels), expansion 6, torchvision's MBConv table
    cin, h = 16, 112
    for stage, (k, s, c) in enumerate(((3, 2, 24), (5, 2, 40), (3, 2, 80), (5, 1, 112)), 2):
        for i in range(2):
            stride = s if i == 0 else 1
            hidden, out = 6 * cin, h // stride
            block = f"features.{stage}.{i}.block"
            rows += [
                (f"{block}.0.0", conv(cin, h, hidden, 1)),
                (f"{block}.1.0", dw(hidden, h, k, stride)),
                (f"{block}.2.fc1", conv(hidden, 1, cin // 4, 1)),
                (f"{block}.3.0", conv(hidden, out, c, 1)),
            ]
            cin, h = c, out
    return [
        *rows,
        ("features.6.0.block.1.0", dw(672, 14, 5, 2)),
        ("features.6.0.block.3.0", conv(672, 7, 192, 1)),
        ("features.6.1.block.0.0", conv(192, 7, 1152, 1)),
        ("features.6.1.block.1.0", dw(1152, 7, 5)),
        ("features.7.0.block.1.0", dw(1152, 7, 3)),
        ("features.7.0.block.3.0", conv(1152, 7, 320, 1)),
        ("features.8.0", conv(320, 7, 1280, 1)),
        ("classifier.1", dense(1, 1000, 1280)),
    ]


def _inception_v3() -> Rows:
    return [
        ("Conv2d_1a_3x3.conv", conv(3, 299, 32, 3, 2)),
        ("Conv2d_2a_3x3.conv", conv(32, 149, 32, 3)),
        ("Conv2d_2b_3x3.conv", conv(32, 147, 64, 3, 1, 1)),
        ("maxpool1", pool(64, 147, 3, 2)),
        ("Conv2d_3b_1x1.conv", conv(64, 73, 80, 1)),
        ("Conv2d_4a_3x3.conv", conv(80, 73, 192, 3)),
        ("maxpool2", pool(192, 71, 3, 2)),
        ("Mixed_5b.branch1x1.conv", conv(192, 35, 64, 1)),
        ("Mixed_5b.branch5x5_1.conv", conv(192, 35, 48, 1)),
        ("Mixed_5b.branch5x5_2.conv", conv(48, 35, 64, 5, 1, 2)),
        ("Mixed_5b.branch3x3dbl_2.conv", conv(64, 35, 96, 3, 1, 1)),
        ("Mixed_5b.branch3x3dbl_3.conv", conv(96, 35, 96, 3, 1, 1)),
        ("Mixed_5b.branch_pool.conv", conv(192, 35, 32, 1)),
        ("Mixed_5c.branch1x1.conv", conv(256, 35, 64, 1)),
        ("Mixed_6a.branch3x3.conv", conv(288, 35, 384, 3, 2)),
        ("Mixed_6a.branch3x3dbl_3.conv", conv(96, 35, 96, 3, 2)),
        ("Mixed_6a.max_pool2d", pool(288, 35, 3, 2)),
        ("Mixed_6b.branch1x1.conv", conv(768, 17, 192, 1)),
        ("Mixed_6b.branch7x7_1.conv", conv(768, 17, 128, 1)),
        ("Mixed_6b.branch7x7_2.conv", conv(128, 17, 128, 1, s=7, w=23)),
        ("Mixed_6b.branch7x7_3.conv", conv(128, 23, 192, 7, s=1, w=17)),
        ("Mixed_6e.branch7x7_2.conv", conv(192, 17, 192, 1, s=7, w=23)),
        ("Mixed_7a.branch3x3_2.conv", conv(192, 17, 320, 3, 2)),
        ("Mixed_7b.branch1x1.conv", conv(1280, 8, 320, 1)),
        ("Mixed_7b.branch3x3_1.conv", conv(1280, 8, 384, 1)),
        ("Mixed_7b.branch3x3_2a.conv", conv(384, 8, 384, 1, s=3, w=10)),
        ("Mixed_7b.branch3x3dbl_1.conv", conv(1280, 8, 448, 1)),
        ("Mixed_7b.branch3x3dbl_2.conv", conv(448, 8, 384, 3, 1, 1)),
        ("Mixed_7c.branch1x1.conv", conv(2048, 8, 320, 1)),
        ("fc", dense(1, 1000, 2048)),
    ]


def _shufflenet_v2() -> Rows:
    rows = [("conv1.0", conv(3, 224, 24, 3, 2, 1)), ("maxpool", pool(24, 112, 3, 2, 1))]
    cin, h = 24, 56
    for stage, c in ((2, 116), (3, 232), (4, 464)):
        half, out = c // 2, h // 2
        rows += [
            (f"stage{stage}.0.branch1.0", dw(cin, h, 3, 2)),
            (f"stage{stage}.0.branch1.2", conv(cin, out, half, 1)),
            (f"stage{stage}.0.branch2.0", conv(cin, h, half, 1)),
            (f"stage{stage}.0.branch2.3", dw(half, h, 3, 2)),
            (f"stage{stage}.1.branch2.0", conv(half, out, half, 1)),
            (f"stage{stage}.1.branch2.3", dw(half, out, 3)),
        ]
        cin, h = c, out
    return [*rows, ("conv5.0", conv(464, 7, 1024, 1)), ("fc", dense(1, 1000, 1024))]


def _densenet121() -> Rows:
    rows = [
        ("features.conv0", conv(3, 224, 64, 7, 2, 3)),
        ("features.pool0", pool(64, 112, 3, 2, 1)),
    ]
    # growth 32, bottleneck 128; layer i of a block sees in + 32*(i-1) channels
    cin, h = 64, 56
    for block, n in enumerate((6, 12, 24, 16), 1):
        for i in sorted({1, n // 2, n}):
            rows.append(
                (
                    f"features.denseblock{block}.denselayer{i}.conv1",
                    conv(cin + 32 * (i - 1), h, 128, 1),
                )
            )
        rows.append((f"features.denseblock{block}.denselayer1.conv2", conv(128, h, 32, 3, 1, 1)))
        cin += 32 * n
        if block < 4:
            rows.append((f"features.transition{block}.conv", conv(cin, h, cin // 2, 1)))
            cin, h = cin // 2, h // 2
    return [*rows, ("classifier", dense(1, 1000, 1024))]


def _convnext_tiny() -> Rows:
    rows = [
        ("features.0.0", conv(3, 224, 96, 4, 4)),
        ("features.0.1", ln(56 * 56, 96)),
    ]
    h = 56
    for stage, dim in enumerate((96, 192, 384, 768)):
        if stage:
            rows.append((f"features.{2 * stage}.1", conv(dim // 2, 2 * h, dim, 2, 2)))
        block = f"features.{2 * stage + 1}.0.block"
        rows += [
            (f"{block}.0", dw(dim, h, 7)),
            (f"{block}.2", ln(h * h, dim)),
            (f"{block}.3", dense(h * h, 4 * dim, dim, "bias+gelu")),
            (f"{block}.5", dense(h * h, dim, 4 * dim)),
        ]
        h //= 2
    return [*rows, ("classifier.0", ln(1, 768)), ("classifier.2", dense(1, 1000, 768))]


def _alexnet() -> Rows:
    return [
        ("features.0", conv(3, 224, 64, 11, 4, 2)),
        ("features.2", pool(64, 55, 3, 2)),
        ("features.3", conv(64, 27, 192, 5, 1, 2)),
        ("features.5", pool(192, 27, 3, 2)),
        ("features.6", conv(192, 13, 384, 3, 1, 1)),
        ("features.8", conv(384, 13, 256, 3, 1, 1)),
        ("features.12", pool(256, 13, 3, 2)),
        ("classifier.1", dense(1, 4096, 9216)),
        ("classifier.4", dense(1, 4096, 4096)),
        ("classifier.6", dense(1, 1000, 4096)),
    ]


def _yolov5s() -> Rows:
    rows = [
        ("model.0.conv", conv(3, 640, 32, 6, 2, 2)),
        ("model.1.conv", conv(32, 320, 64, 3, 2, 1)),
    ]
    # C3 blocks: (index, in=out channels, grid), each followed by a strided 3x3 Conv
    for index, c, h in ((2, 64, 160), (4, 128, 80), (6, 256, 40), (8, 512, 20)):
        rows += [
            (f"model.{index}.cv1.conv", conv(c, h, c // 2, 1)),
            (f"model.{index}.m.0.cv1.conv", conv(c // 2, h, c // 2, 1)),
            (f"model.{index}.m.0.cv2.conv", conv(c // 2, h, c // 2, 3, 1, 1)),
            (f"model.{index}.cv3.conv", conv(c, h, c, 1)),
        ]
        if index < 8:
            rows.append((f"model.{index + 1}.conv", conv(c, h, 2 * c, 3, 2, 1)))
    return [
        *rows,
        ("model.9.m", pool(256, 20, 5, 1, 2)),
        ("model.9.cv2.conv", conv(1024, 20, 512, 1)),
        ("model.24.m.0", conv(128, 80, 255, 1)),
        ("model.24.m.1", conv(256, 40, 255, 1)),
        ("model.24.m.2", conv(512, 20, 255, 1)),
    ]


CNN_NETWORKS: dict[str, Callable[[], Rows]] = {
    "resnet50": _resnet50,
    "resnext50_32x4d": _resnext50,
    "mobilenet_v2": _mobilenet_v2,
    "efficientnet_b0": _efficientnet_b0,
    "inception_v3": _inception_v3,
    "shufflenet_v2": _shufflenet_v2,
    "densenet121": _densenet121,
    "convnext_tiny": _convnext_tiny,
    "alexnet": _alexnet,
    "yolov5s": _yolov5s,
}
