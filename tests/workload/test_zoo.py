"""The catalog of real networks' layers: every spec parses, and each family is a usable sample."""

import pytest

from tensortune.errors import SpecError
from tensortune.workload import workload, zoo


@pytest.mark.parametrize("family", sorted(zoo.FAMILIES))
def test_every_family_is_parsed_named_and_deduplicated(family):
    rows = zoo.FAMILIES[family]
    assert len(rows) >= 5
    assert all(layer.family == family for layer in rows)
    names = [layer.name for layer in rows]
    assert len(set(names)) == len(names), "layer names repeat"
    canonical = [workload(layer.spec).name for layer in rows]
    assert len(set(canonical)) == len(canonical), "a spec is listed twice"


def test_catalog_covers_the_op_classes_kernels_must_handle():
    specs = [workload(layer.spec) for layer in zoo.layers()]
    ops = {w.op for w in specs}
    assert {"matmul", "dense", "batch_matmul", "conv2d", "maxpool2d", "softmax", "layernorm"} <= ops
    convs = [dict(w.params) for w in specs if w.op == "conv2d"]
    assert {1, 3, 5, 7} <= {c["R"] for c in convs}
    assert {1, 2, 4, 16} <= {c["stride"] for c in convs}
    assert any(c["groups"] == c["C"] > 1 for c in convs), "no depthwise conv"
    assert any(1 < c["groups"] < c["C"] for c in convs), "no grouped conv"


def test_layers_selects_families_in_order_and_by_key_labels_them():
    picked = zoo.layers(["dlrm", "vit_b16"])
    assert picked == [*zoo.FAMILIES["dlrm"], *zoo.FAMILIES["vit_b16"]]
    keyed = zoo.by_key()
    assert len(keyed) == len(zoo.layers())
    assert keyed["resnet50/layer4.1.conv2"].spec == "conv2d:C=512,H=7,W=7,K=512,R=3,S=3,pad=1"


def test_an_unknown_family_is_named_with_the_known_ones():
    with pytest.raises(SpecError, match=r"'resnet51'.*known: resnet50"):
        zoo.layers(["resnet51"])
