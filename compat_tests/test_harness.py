"""The harness itself: the allow-list file is well-formed and every entry has a reason; the
difference recorder fails on unlisted differences and reports listed ones; the table renders."""

from __future__ import annotations

import pytest

from compat_tests.support import allowlist
from compat_tests.support.allowlist import Differences, known_differences, lookup
from compat_tests.support.summary import CompatResults


def test_allow_list_entries_have_ids_and_reasons() -> None:
    entries = known_differences()
    assert len({e.id for e in entries}) == len(entries), "duplicate ids"
    for e in entries:
        assert "." in e.id and len(e.reason) > 20, e


def test_differences_fail_unless_allow_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allowlist, "known_differences",
                        lambda path=None: (allowlist.KnownDifference("scn.allowed.*", "because"),))
    seen: list[str] = []
    d = Differences("scn", seen.append)
    d.compare_all({"same": 1, "allowed.x": 2, "bad": 3, "only_quire": 1}, {"same": 1, "allowed.x": 5, "bad": 4})
    assert seen == ["scn.allowed.x"]
    with pytest.raises(AssertionError) as e:
        d.verify()
    assert "scn.bad: quire=3 kafka=4" in str(e.value) and "scn.only_quire" in str(e.value)
    assert lookup("nothing.listed.like.this") is None


def test_summary_table() -> None:
    r = CompatResults()
    r.label("a", "produce-consume", "kcat")
    r.label("b", "produce-consume", "kcat")
    r.label("c", "differential", "raw protocol")
    r.record("a", "call", "passed", [])
    r.record("b", "setup", "failed", [])
    r.record("c", "call", "passed", ["x.y"])
    r.record("unlabelled", "call", "passed", [])
    lines = r.render()
    assert lines[0].split(" | ")[0].strip() == "suite"
    rows = {tuple(c.strip() for c in line.split("|")[:2]): [c.strip() for c in line.split("|")[2:]]
            for line in lines[2:4]}
    assert rows[("produce-consume", "kcat")] == ["1", "1", "0", "0"]
    assert rows[("differential", "raw protocol")] == ["1", "0", "0", "1"]
    assert any(line.strip().startswith("x.y:") for line in lines)
