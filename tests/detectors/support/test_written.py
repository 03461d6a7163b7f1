"""What a text agent's answer writes as its action: an XML-style call or a fenced block, read from its text."""

from __future__ import annotations

import pytest

from runguard.detectors.support.written import action, asked, edits, places, quiet, wording, written


def xml_call(name: str, **parameters: str) -> str:
    """A call written as text the way SWE-agent 1.x's text protocol writes it."""
    body = "".join(f"<parameter={key}>{value}</parameter>\n" for key, value in parameters.items())
    return f"<function={name}>\n{body}</function>"


def test_the_action_is_the_last_call_or_block_written() -> None:
    two = f"First this:\n```\nls\n```\nthen:\n{xml_call('bash', command='pwd')}"
    assert written(two) == xml_call("bash", command="pwd")
    assert written("```\nopen a.py\n```\nor\n```\nopen b.py\n```") == "open b.py\n"
    assert written("Let me think.") == "" and action("Let me think.") == ""
    assert action("```\nls   -la\n```") == action("```\nls -la\n```")  # spaces collapsed


def test_places_are_the_numbers_paths_and_files_of_the_blocks_first_line() -> None:
    assert places("```\nedit 46:46\n    x = 1\nend_of_edit\n```") == places("```\nedit 46:46\n```")
    assert len(places("```\nopen src/Parser.java 120\n```")) == 2
    assert places(xml_call("bash", command="grep -n x a.py")) == frozenset()  # no block


def test_wording_leaves_numbers_aside() -> None:
    assert wording("view lines 620-630") == wording("view lines 610-620") != wording("view lines of a.py")


def test_quiet_is_a_command_that_printed_nothing() -> None:
    assert quiet(["Your command ran successfully and did not produce any output."])
    assert not quiet(["OBSERVATION:\n41:    def emit(self):"]) and not quiet([])


@pytest.mark.parametrize(
    ("answer", "writes"),
    [
        (xml_call("str_replace_editor", command="str_replace", path="a.py", old_str="x", new_str="y"), True),
        (xml_call("str_replace_editor", command="create", path="a.py", file_text="x"), True),
        ("```\nedit 41:43\n    return x\nend_of_edit\n```", True),
        (xml_call("bash", command="sed -i 's/x/y/' a.py"), True),
        ("```bash\ncat <<'EOF' > a.py\nprint(1)\nEOF\n```", True),
        (xml_call("str_replace_editor", command="view", path="a.py"), False),
        ("```bash\npython a.py > out.txt\n```", False),
        ("Let me think about it first.", False),
    ],
)
def test_what_counts_as_an_edit(answer: str, writes: bool) -> None:
    assert edits(answer) is writes


@pytest.mark.parametrize(
    ("answer", "reads"),
    [
        (xml_call("str_replace_editor", command="view", path="a.py", view_range="[1, 9]"), True),
        (xml_call("bash", command='grep -rn "make_xrefs" src/ | head -20'), True),
        (xml_call("bash", command="cd /repo && git log --oneline -5 && sed -n 1,40p a.py"), True),
        ("```\nfind / -name 'notes*' 2>/dev/null\n```", True),
        ("```\nsearch_dir make_xrefs src\n```", True),
        (xml_call("str_replace_editor", command="str_replace", path="a.py", old_str="x", new_str="y"), False),
        (xml_call("bash", command="grep -n x a.py > hits.txt"), False),
        (xml_call("bash", command="sed -i 's/x/y/' a.py"), False),
        (xml_call("bash", command="python reproduce.py"), False),
        ("```\nfind . -name '*.pyc' -delete\n```", False),
        ("Let me think about it first.", False),
    ],
)
def test_what_counts_as_only_reading(answer: str, reads: bool) -> None:
    assert asked(answer)[0] is reads


def test_the_names_a_command_asks_about_leave_numbers_and_tags_aside() -> None:
    one = asked(xml_call("str_replace_editor", command="view", path="/repo/a.py", view_range="[1, 9]"))[1]
    other = asked(xml_call("str_replace_editor", command="view", path="/repo/a.py", view_range="[40, 90]"))[1]
    grep = asked(xml_call("bash", command="grep -n make_xrefs /repo/a.py"))[1]
    assert one == other and len(grep - one) == 2  # `grep` and `make_xrefs`
