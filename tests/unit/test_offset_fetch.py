"""kpax.proto.offset_fetch: one OffsetFetch for one group in either shape (v8+
``groups``, older top-level), and its answer read back the same way."""

from __future__ import annotations

import pytest

from kpax.proto.messages import OffsetFetchRequest, OffsetFetchResponse
from kpax.proto.offset_fetch import offset_fetch_answer, offset_fetch_request

R = OffsetFetchResponse


@pytest.mark.parametrize("version", [1, 7, 8, 9])
def test_request_for_one_group_in_the_shape_of_the_version(version: int) -> None:
    req = offset_fetch_request(version, "g", {"t": [0, 2]}, require_stable=version >= 7)
    back = OffsetFetchRequest.decode(req.encode(version), version)
    if version >= 8:
        (group,) = back.groups
        assert group.group_id == "g"
        assert [(t.name, t.partition_indexes) for t in group.topics] == [("t", [0, 2])]
    else:
        assert back.group_id == "g"
        assert [(t.name, t.partition_indexes) for t in back.topics] == [("t", [0, 2])]
    everything = offset_fetch_request(version, "g", None, require_stable=False)
    if version >= 8:
        assert everything.groups[0].topics is None
    elif version >= 2:
        assert OffsetFetchRequest.decode(everything.encode(version), version).topics is None


def test_answer_reads_the_group_in_either_shape() -> None:
    parts = [R.OffsetFetchResponsePartition(partition_index=0, committed_offset=5)]
    old = R(error_code=0, topics=[R.OffsetFetchResponseTopic(name="t", partitions=parts)])
    code, topics = offset_fetch_answer(old, 7)
    assert code == 0 and topics[0].name == "t" and topics[0].partitions[0].committed_offset == 5
    new = R(
        groups=[
            R.OffsetFetchResponseGroup(
                group_id="g",
                error_code=16,
                topics=[
                    R.OffsetFetchResponseTopics(
                        name="t",
                        partitions=[
                            R.OffsetFetchResponsePartitions(partition_index=0, committed_offset=7)
                        ],
                    )
                ],
            )
        ]
    )
    code, topics = offset_fetch_answer(new, 8)
    assert code == 16 and topics[0].partitions[0].committed_offset == 7
