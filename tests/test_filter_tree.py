"""The simulated broker's filter index (`FilterTree`) against `matches`, the §4.7 matching
it stands in for: the same filters for every topic, as filters come and go."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.substrates.filters import FilterTree, matches

#: levels from a small alphabet, so that filters and topics meet often; `+`, `#` and `$`
#: where they are legal and where they are not (a broker's index is handed what it gets)
LEVEL = st.sampled_from(["a", "b", "", "$SYS", "$x", "+", "#"])
NAME = st.lists(LEVEL, min_size=1, max_size=4).map("/".join)


@given(st.lists(NAME, max_size=12), st.lists(NAME, max_size=8), st.data())
def test_the_tree_finds_exactly_the_filters_that_match(filters: list[str], topics: list[str],
                                                      data: st.DataObject) -> None:
    tree = FilterTree()
    for f in filters:
        tree.add(f)
    # mostly filters it holds (their levels pruned), now and then one it never had
    gone = data.draw(st.lists(st.sampled_from(filters) if filters else NAME, max_size=6)
                     | st.lists(NAME, max_size=2))
    for f in gone:
        tree.discard(f)
    kept = set(filters) - set(gone)
    for topic in [*topics, *filters]:
        found = tree.matching(topic)
        assert len(found) == len(set(found)), (topic, found)
        assert set(found) == {f for f in kept if matches(f, topic)}, (topic, kept)


def test_the_tree_keeps_no_level_a_discarded_filter_left() -> None:
    tree = FilterTree()
    tree.add("a/b/+/c")
    tree.add("a/#")
    tree.discard("a/b/+/c")
    tree.discard("a/#")
    tree.discard("never/added")
    assert tree.matching("a/b/x/c") == []
    assert not tree._root.children and not tree._root.rest
