"""Admin value types: config resources and alter-config ops as users write them."""

from __future__ import annotations

import pytest


def test_config_resource_type_by_name_or_number():
    from kpax.admin import ConfigResource, ConfigResourceType

    assert ConfigResource("group", "g").type is ConfigResourceType.GROUP
    assert ConfigResource("TOPIC", "t") == ConfigResource.topic("t")
    assert ConfigResource(4, 1) == ConfigResource.broker(1)
    assert ConfigResource("client-metrics", "m").type is ConfigResourceType.CLIENT_METRICS
    with pytest.raises(ValueError, match="'topic', 'broker'"):
        ConfigResource("bogus", "x")


def test_alter_config_ops_from_a_dict_or_pairs():
    from kpax.admin import AlterConfigOp, AlterConfigOpType
    from kpax.admin.types import alter_config_ops

    assert alter_config_ops("r", {"a": 1, "b": None, "c": True}) == [
        AlterConfigOp("a", "1"),
        AlterConfigOp("b", None, AlterConfigOpType.DELETE),
        AlterConfigOp("c", "true"),
    ]
    assert alter_config_ops("r", [("a", "x"), AlterConfigOp("b", op="append")]) == [
        AlterConfigOp("a", "x"),
        AlterConfigOp("b", None, AlterConfigOpType.APPEND),
    ]
    with pytest.raises(TypeError, match="changes of r"):
        alter_config_ops("r", ["a"])
