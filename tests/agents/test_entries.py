"""Delivery entries: every kind is written by a record or the heartbeat, as plain text that
reads back into its EntryKind after the spool's JSON."""

from __future__ import annotations

import json

from agents.entries import KINDS, EntryKind, heartbeat, to_entry
from agents.records import GpuGap


def test_every_entry_kind_has_a_writer():
    assert {*KINDS.values(), EntryKind.HEARTBEAT} == set(EntryKind)


def test_entry_kinds_are_plain_text_that_reads_back():
    for entry in (to_entry(GpuGap(uuid="GPU-0", t=5.0, reason="GPU is lost")), heartbeat(6.0)):
        assert type(entry["kind"]) is str          # plain data, stable across versions
        spooled = json.loads(json.dumps(entry))
        assert spooled == entry
        assert EntryKind(spooled["kind"]).value == entry["kind"]
    assert to_entry(GpuGap(uuid="GPU-0", t=5.0, reason="x"))["kind"] == "gap"
