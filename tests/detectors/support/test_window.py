"""A conversation's turns as `text_loop` remembers them, and what a window of them says."""

from __future__ import annotations

from runguard.detectors.support.shingles import pack
from runguard.detectors.support.window import Turn, asks, awaited, fresh, probe, rerun, same_answers


def turn(**fields: object) -> Turn:
    values: dict[str, object] = {"speaker": "agent", "short": False, "kept": frozenset()}
    values |= {"told": frozenset(), "said": frozenset(), **fields}
    return Turn(**values)  # type: ignore[arg-type]


def test_a_stored_turn_is_read_back_and_older_formats_still_read() -> None:
    item = f"t1~agent~f~{pack(range(10))}~{pack([3, 4])}~~h1~p1,p2~a1~q~w1~e~r~w2,w3"
    assert Turn.parse(item) == Turn(
        "agent", False, frozenset(range(10)), frozenset({3, 4}), frozenset(), "h1", frozenset({"p1", "p2"}),
        "a1", True, "w1", True, True, frozenset({"w2", "w3"}),
    )  # fmt: skip
    before_words = Turn.parse(item.rsplit("~", 2)[0])
    assert before_words.edits and not before_words.reads and before_words.words == frozenset()
    assert Turn.parse(f"t1~agent~{pack(range(5))}") == turn(kept=frozenset(range(5)))  # before observations


def test_a_turn_told_something_half_new_or_working_on_new_places_is_fresh() -> None:
    old = turn(told=frozenset(range(20)), heard="h0", places=frozenset({"p0"}))
    assert fresh([old, turn(told=frozenset(range(10, 30)))], 1, 0.5)
    assert not fresh([old, turn(told=frozenset(range(5, 25)))], 1, 0.5)  # 15 of 20 seen
    elsewhere = turn(told=frozenset(range(20)), heard="h1", places=frozenset({"p1"}))
    assert fresh([old, elsewhere], 1, 0.5)  # told something else, at a place no action named
    assert not fresh([old, turn(told=frozenset(range(20)), heard="h0", places=frozenset({"p1"}))], 1, 0.5)


def test_a_new_command_that_printed_nothing_is_a_probe_and_the_same_again_a_rerun() -> None:
    turns = [turn(action="grep-a"), turn(action="grep-b", quiet=True), turn(action="grep-a", quiet=True)]
    assert probe(turns, 1) and not probe(turns, 2) and not probe([*turns[:1], turn(action="grep-b")], 1)
    assert rerun(turns, 2) and not rerun(turns, 1) and not rerun([turn(), turn()], 1)  # no action: no rerun


def test_a_read_naming_a_word_no_earlier_action_named_asks_something_new() -> None:
    window = [turn(words=frozenset({"grep", "fields"})), turn(words=frozenset({"view", "fields"}))]
    assert asks([*window, turn(reads=True, words=frozenset({"grep", "make_xrefs"}))], 2)
    assert not asks([*window, turn(reads=True, words=frozenset({"view", "fields"}))], 2)  # another window
    assert not asks([*window, turn(reads=False, words=frozenset({"python", "reproduce"}))], 2)  # a program run


def fix_and_check(outputs: list[str]) -> list[Turn]:
    """A script written and run, then per output an edit and the script run again (what it printed is what
    the next turn heard); last, a new edit."""
    turns = [turn(action="create", edits=True), turn(action="run")]
    for n, output in enumerate(outputs[:-1]):
        turns += [turn(action=f"edit-{n}", edits=True, heard=output), turn(action="run", heard="edited")]
    return [*turns, turn(action="edit-last", edits=True, heard=outputs[-1])]


def test_a_new_edit_waits_for_its_check_when_checks_print_something_else_after_edits() -> None:
    assert awaited(fix_and_check(["first error", "second error", "third error"]))
    assert not awaited(fix_and_check(["same error"] * 3))  # a check that prints the same whatever is edited
    assert not awaited(fix_and_check(["first error", "second error", "third error"])[:-1])  # the check ran


def test_same_answers_count_moving_calls_and_stop_at_a_poll() -> None:
    paging = [turn(wording="look", action=f"view-{n}") for n in range(5)]
    assert same_answers([turn(wording="other", action="x"), *paging]) == 5
    assert same_answers([*paging, turn(wording="look", action="view-4")]) == 1  # the same call again: a poll
    assert same_answers([turn(wording="", action="a")]) == 0  # stored without a wording
