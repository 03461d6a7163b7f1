"""`text_loop`: agents that write their calls as text (ReAct, code agents, group chats) going round in circles."""

from __future__ import annotations

import dataclasses

from runguard.detectors.text_loop import TextLoop, TextLoopConfig
from tests.detectors.harness import RunSimulator, Step, call, first_trip, request, response, result, shows

FLIGHTS = [
    ("TAP Air Portugal", "TP552", "07:05", "nonstop", 89),
    ("easyJet", "U27331", "10:40", "nonstop", 64),
    ("Ryanair", "FR1882", "18:15", "nonstop", 41),
    ("Lufthansa", "LH1173", "13:20", "one stop in Frankfurt", 132),
    ("Eurowings", "EW9413", "06:30", "nonstop", 77),
    ("Vueling", "VY8460", "15:55", "one stop in Barcelona", 58),
    ("KLM", "KL1692", "11:10", "one stop in Amsterdam", 118),
    ("Iberia", "IB3107", "09:45", "one stop in Madrid", 96),
]
RESULTS = "Observation:\n" + "\n".join(
    f"{n}. {airline} {code} Lisbon (LIS) to Berlin (BER), departs {time}, {stops}, economy fare {fare} EUR, "
    f"cabin bag included, checked bag extra"
    for n, (airline, code, time, stops, fare) in enumerate(FLIGHTS, 1)
)
ACTIONS = [
    "Thought: I should look for cheap flights. Action: search[cheapest flight Lisbon to Berlin in May]",
    "Thought: Let me try other words. Action: search[lowest fare LIS BER May]",
    "Thought: Maybe a budget airline query works better. Action: search[budget airline Lisbon Berlin spring]",
    "Thought: I will search once more. Action: search[cheap tickets Portugal Germany May]",
    "Thought: Another search. Action: search[discount flights Lisbon Berlin]",
    "Thought: Again. Action: search[Lisbon Berlin low cost]",
]


def react(observations: list[str], actions: list[str], agent: str = "agent") -> list[Step]:
    """A ReAct loop in text: request i carries observation i-1 as a user message; response i is action i."""
    steps = []
    for i, action in enumerate(actions):
        said = "Find the cheapest flight from Lisbon to Berlin in May." if i == 0 else observations[i - 1]
        steps.append(
            Step(
                request(agent_name=agent, user_text=said, message_count=2 * i + 2, assistant_turns=i),
                response(text=action),
            )
        )
    return steps


async def test_a_react_agent_getting_the_same_observation_is_stopped() -> None:
    results = await RunSimulator([TextLoop()]).run(react([RESULTS] * 6, ACTIONS))
    # Turn 1 (the task and first action) is new, turn 2 brings the results; turns 3, 4, 5 repeat them.
    assert first_trip(results) == 5
    finding = results[4].one("text_loop")
    assert results[4].response == [finding] and finding.action == "block"  # judged after the answer
    assert results[5].blocked_by == "text_loop"  # its breaker answers the next request
    assert len(finding.evidence["new_shares"]) == 3 and shows(finding, "agents")["agents"] == ["agent"] * 3


async def test_a_react_agent_learning_something_each_step_passes() -> None:
    observations = [
        f"Observation: page {i}: flight {100 + i} departs {6 + i}:15 from terminal {i % 2 + 1}, fare {40 + 9 * i} EUR, "
        f"operated by carrier number {i * 7} with {i + 1} bags allowed and seat pitch {28 + i} inches on route {i}"
        for i in range(6)
    ]
    actions = [f"Thought: noted fare {40 + 9 * i}. Action: open[result page {i + 1} of the listing]" for i in range(6)]
    assert first_trip(await RunSimulator([TextLoop()]).run(react(observations, actions))) is None


async def test_a_group_chat_going_round_in_circles_is_stopped_whoever_speaks() -> None:
    draft = (
        "Draft: Our app helps remote teams plan sprints, track blockers and see who is overloaded before the "
        "sprint starts, with one board for planning and one for review."
    )
    review = (
        "Review: the draft is too long and the benefit is vague; please name the audience and lead with "
        "overload, then cut the second half about boards."
    )
    steps = []
    for i in range(8):
        speaker, said, answer = ("writer", review, draft) if i % 2 == 0 else ("critic", draft, review)
        steps.append(Step(request(agent_name=speaker, user_text=said, message_count=i + 2), response(text=answer)))
    results = await RunSimulator([TextLoop()]).run(steps)
    assert first_trip(results) == 4
    assert set(results[3].one("text_loop").evidence["agents"]) == {"writer", "critic"}


async def test_a_selectors_short_picks_are_not_judged() -> None:
    transcript = " ".join(f"turn {i}: a message about the plan" for i in range(40))
    steps = [Step(request(agent_name="selector", user_text=transcript), response(text="writer")) for _ in range(6)]
    sim = RunSimulator([TextLoop()])
    assert first_trip(await sim.run(steps)) is None
    assert await sim.run_state_bytes() < 200  # nothing kept


async def test_requests_with_tools_are_left_to_the_tool_detectors() -> None:
    with_results = [
        Step(
            request(
                user_text=RESULTS, prior_calls=[call("search", {}, "c1")], new_results=[result("search", "x", "c1")]
            ),
            response(text=ACTIONS[0]),
        )
        for _ in range(6)
    ]
    assert first_trip(await RunSimulator([TextLoop()]).run(with_results)) is None
    declared = [
        dataclasses.replace(s, request=dataclasses.replace(s.request, tool_names=("search",)))
        for s in react([RESULTS] * 6, ACTIONS)
    ]
    assert first_trip(await RunSimulator([TextLoop()]).run(declared)) is None


async def test_a_retried_request_is_not_judged_twice() -> None:
    steps = react([RESULTS] * 6, ACTIONS)
    same = [*steps[:3], *[dataclasses.replace(steps[3], body="same")] * 4]
    assert first_trip(await RunSimulator([TextLoop()]).run(same)) is None


async def test_turns_is_tightenable() -> None:
    results = await RunSimulator([(TextLoop(), TextLoopConfig(turns=2))]).run(react([RESULTS] * 6, ACTIONS))
    assert first_trip(results) == 4


FOOTER = "(Open file: n/a)\n(Current directory: {where})\nshell-$"


def shell(turns: list[tuple[str, str]]) -> list[Step]:
    """A text-protocol coding agent: request i carries the output of command i-1 (with the harness's footer
    naming the directory) as user text; response i is the model's discussion and its next command."""
    steps = []
    for i, (output, answer) in enumerate(turns):
        said = "Fix the failing parser test in this repository." if i == 0 else output
        steps.append(Step(request(user_text=said, message_count=2 * i + 2, assistant_turns=i), response(text=answer)))
    return steps


async def test_walking_a_folder_tree_one_listing_at_a_time_passes() -> None:
    """Each `cd` prints nothing (a full turn that adds little: the footer and a formulaic answer) and each
    listing is a short turn whose output is new: the walk is not a loop."""
    folders = ["src", "main", "java", "org", "acme", "parser", "core", "impl"]
    turns, where = [], "/workspace/acme-parser-service"
    for i, folder in enumerate(folders):
        listing = folders[i + 1] + "/" if i + 1 < len(folders) else "Parser.java"
        nothing = f"Your command ran successfully and did not produce any output.\n{FOOTER.format(where=where)}"
        turns.append((nothing, f"DISCUSSION\nLet's enter the `{folder}` directory.\n```\ncd {folder}\n```"))
        where += f"/{folder}"
        listed = f"{listing}\n{FOOTER.format(where=where)}"
        turns.append((listed, "DISCUSSION\nLet's list what it holds.\n```\nls -F\n```"))
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) is None


async def test_going_into_a_folder_that_is_not_there_again_and_again_is_stopped() -> None:
    """The same failing command with the shell's line counter ticking and the answer apologising in a few
    words of its own: the counter is no news and neither is the apology."""
    apologies = ["Apologies for the typo.", "I apologise for the confusion.", "I apologise for the repeated mistake."]
    apologies += ["I apologise for the confusion."] * 3
    turns = [
        (
            f"bash: line {17871 + 15 * i}: cd: parsr/: No such file or directory\n{FOOTER.format(where='/repo')}",
            f"DISCUSSION\n{apology} The folder we need is called `parser`, so let's change into it and then list "
            "the files it holds.\n```\ncd parsr/\n```",
        )
        for i, apology in enumerate(apologies)
    ]
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) == 5


async def test_a_long_output_leaves_room_for_the_answer() -> None:
    """A test run prints pages that mostly repeat the last run's; the model's long new analysis of the one
    failure that changed is read whole, not cut off by the output's length."""
    suite = "\n".join(f"tests/test_parser.py::test_case_{n} PASSED and took no time at all" for n in range(400))
    turns = [("", "DISCUSSION\nLet's run the tests first.\n```\npytest\n```")]
    for i in range(6):
        analysis = " ".join(f"finding{i}x{n} shows why branch {i} of the tokenizer drops token {n}" for n in range(40))
        turns.append((f"{suite}\nFAILED tests/test_parser.py::test_edge_{i}", f"THOUGHT: {analysis}\n```\npytest\n```"))
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) is None


async def test_a_fix_and_test_loop_with_short_test_runs_between_is_stopped() -> None:
    """The same edit, then the same short test run with the same failure, over and over: a short turn that
    brings nothing new does not break the loop."""
    failure = "\n".join(f"tests/test_depth.py:{12 + n}: in test_depth: assert tokenize(t) == want" for n in range(6))
    edit = (
        "DISCUSSION\nThe comparison in `tokenize` must be strict; let's flip it back and run the test again.\n"
        "```\nedit 41:41\n    if depth >= limit:\nend_of_edit\n```"
    )
    turns = []
    for _ in range(6):
        turns.append((f"FAILED tests/test_depth.py\n{failure}\n{FOOTER.format(where='/repo')}", edit))
        run_it = "Now the test.\n```\npytest tests/test_depth.py\n```"
        turns.append((f"File updated.\n{FOOTER.format(where='/repo')}", run_it))
    results = await RunSimulator([TextLoop()]).run(shell(turns))
    assert first_trip(results) == 9


def file_view(done: set[int]) -> str:
    """A file viewer's window onto lines 1-40, the lines in `done` already renamed."""
    rows = [
        f"{n}:        throw {'ParseFailure' if n in done else 'LegacyParseError'}.wrap(cause, null);"
        if n % 10 == 5
        else f"{n}:        // step {n} of the tokenizer reads the next token"
        for n in range(1, 41)
    ]
    return (
        "[File: /repo/src/Tokenizer.java (120 lines total)]\n" + "\n".join(rows) + "\n" + FOOTER.format(where="/repo")
    )


def rename_at(line: int) -> str:
    return (
        "DISCUSSION\nThe next occurrence needs the new exception name as well; let's replace it.\n"
        f"```\nedit {line}:{line}\n        throw ParseFailure.wrap(cause, null);\nend_of_edit\n```"
    )


async def test_applying_one_change_at_one_line_after_another_passes() -> None:
    """A rename done occurrence by occurrence: every view is the same window with one more line changed (nothing
    new to read) and every answer is alike, but each edit works at a line no edit named before and the view
    changed: the agent is working through the file."""
    lines = [5, 15, 25, 35]
    turns = [("", "DISCUSSION\nLet's open the tokenizer.\n```\nopen src/Tokenizer.java\n```")]
    turns.append((file_view(set()), rename_at(lines[0])))
    for i in range(1, len(lines)):
        turns.append((file_view(set(lines[:i])), rename_at(lines[i])))
    turns.append((file_view(set(lines)), "DISCUSSION\nAll occurrences are renamed; let's submit.\n```\nsubmit\n```"))
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) is None


async def test_edits_at_new_lines_rejected_the_same_way_are_stopped() -> None:
    """Edits aimed at other lines each time, each refused with the same error: the places are new, what comes
    back is not."""
    refused = f"Your edit was not applied: the file is read-only in this environment.\n{FOOTER.format(where='/repo')}"
    turns = [("", "DISCUSSION\nLet's open the tokenizer.\n```\nopen src/Tokenizer.java\n```")]
    turns += [(refused, rename_at(line)) for line in (5, 15, 25, 35, 45, 55)]
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) == 5  # as early as without places


NOTHING = "Your command ran successfully and did not produce any output."


def xml_call(name: str, **parameters: str) -> str:
    """A call written as text the way SWE-agent 1.x's text protocol writes it."""
    body = "".join(f"<parameter={key}>{value}</parameter>\n" for key, value in parameters.items())
    return f"<function={name}>\n{body}</function>"


def grep_for(symbol: str, path: str = "/repo/pkg/render/printer.py") -> str:
    """One turn of a search: the same opening sentence every time, another symbol grepped."""
    call = xml_call("bash", command=f"grep -n {symbol} {path}")
    return f"Let me look for the code that prints this kind of node:\n\n{call}"


SYMBOLS = ["_emit_Tuple", "_emit_Container", "_emit_List", "_emit_Iterable", "_emit_Sequence", "_emit_Basic"]


async def test_new_greps_that_each_match_nothing_pass() -> None:
    """A search through names that are not there: every answer opens with the same sentence and every output
    is the harness's fixed "no output" line, but each command is one the agent had not run: a search, not a
    loop (an empty result of a command that worked says nothing either way)."""
    turns = [("", grep_for(SYMBOLS[0]))] + [(NOTHING, grep_for(symbol)) for symbol in SYMBOLS[1:]]
    turns.append(("OBSERVATION:\n41:    def _emit_Function(self, node):", grep_for("_emit_Function")))
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) is None


async def test_the_same_empty_greps_run_again_are_stopped() -> None:
    """The search above, then the same greps again in the same order with the same empty output: a sequence
    replayed, stopped as soon as most of the last three turns repeat an earlier command (the new ones alone
    never stop it)."""
    symbols = SYMBOLS[:4]
    turns = [("", grep_for(symbols[0]))] + [(NOTHING, grep_for(symbol)) for symbol in symbols[1:] + symbols * 2]
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) == 6  # the second repeat


async def test_alternating_two_empty_greps_is_stopped() -> None:
    """Two greps for a method that does not exist, taken in turn: the second round repeats the first."""
    paths = ["/repo/pkg/render/printer.py", "/repo/pkg/render/base.py"]
    turns = [("", grep_for("_emit_Series", paths[0]))]
    turns += [(NOTHING, grep_for("_emit_Series", paths[i % 2])) for i in range(1, 7)]
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) == 5


def page(start: int, size: int, sentence: str) -> tuple[str, str]:
    """One view of a 2,000-line module: new lines every time, under the same sentence and the same call."""
    code = "\n".join(
        f"{n:6}\t    step_{n} = combine(step_{n - 1}, table[{n % 17}])  # pass {n // 40}"
        for n in range(start, start + size)
    )
    view = xml_call(
        "str_replace_editor", command="view", path="/repo/pkg/sets.py", view_range=f"[{start}, {start + size}]"
    )
    return f"OBSERVATION:\nHere's the result of running `cat -n` on /repo/pkg/sets.py:\n{code}", f"{sentence}\n\n{view}"


async def test_paging_through_a_file_under_one_sentence_is_stopped() -> None:
    """Every window is new code, but the answer is the same sentence and the same call each time, numbers
    aside: the agent is not reading what it pages through."""
    sentence = "Let's look at the `contains` method of `Interval`:"
    turns = [("", f"{sentence}\n\n{xml_call('bash', command='wc -l /repo/pkg/sets.py')}")]
    turns += [page(100 * i + 1, 50, sentence) for i in range(20)]
    results = await RunSimulator([TextLoop()]).run(shell(turns))
    assert first_trip(results) == 15  # the 14th view: the first answer (`wc -l`) is another
    assert results[14].one("text_loop").evidence["same_answers"] == 14


async def test_reading_a_file_a_page_at_a_time_then_acting_passes() -> None:
    """Twelve pages of one file under the same sentence, then a reproduction script: reading, not paging."""
    sentence = "Let me read the imports checker for the unused-import logic:"
    turns = [page(100 * i + 1, 100, sentence) for i in range(12)]
    script = xml_call("str_replace_editor", command="create", path="/repo/reproduce.py", file_text="import abc")
    turns.append(("OBSERVATION:\nInvalid `view_range`: [1201, 1300].", f"Now a reproduction script:\n\n{script}"))
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) is None


async def test_polling_a_growing_log_with_the_same_call_passes() -> None:
    """The same sentence and the same command twenty times while a build runs: every answer alike, but the
    call does not move (a poll), and every output brings new lines of the log."""
    poll = (
        f"The build is still running; let me check its log again.\n\n{xml_call('bash', command='tail -n 30 build.log')}"
    )
    turns = [("", poll)]
    for i in range(20):
        lines = "\n".join(
            f"[{i * 30 + n}/900] Compiling module_{i}_{n}.cc into obj/stage_{i}/part_{n}.o" for n in range(30)
        )
        turns.append((f"OBSERVATION:\n{lines}", poll))
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) is None


WARNINGS = "\n".join(
    f"/repo/pkg/core/module_{n}.py:{n + 3}: DeprecationWarning: importing ABCs from 'collections' is deprecated"
    for n in range(6)
)


def run_output(error: str) -> str:
    """A reproduction script's output: the same warnings on every run, then the error of the moment."""
    return f"OBSERVATION:\n{WARNINGS}\nTesting scale(x).evalf():\nTraceback (most recent call last):\n{error}"


def fix(old: str, new: str) -> str:
    edit = xml_call(
        "str_replace_editor", command="str_replace", path="/repo/pkg/core/scale.py", old_str=old, new_str=new
    )
    return f"I see the issue now: the branch for `{old}` misses a case. Let's fix it:\n\n{edit}"


def fixing(errors: list[str], verify: bool = False, reread: int = 2) -> list[tuple[str, str]]:
    """A fix-and-test loop: the script written and run, then per error an edit, its confirmation and the
    script run again (`verify`: then a second check); from fix `reread` on, a re-read of the same lines first.
    `errors`: what each run prints."""
    rerun = f"Let's run the reproduce script again:\n\n{xml_call('bash', command='python /repo/reproduce.py')}"
    check = f"And the other cases:\n\n{xml_call('bash', command='python /repo/verify_cases.py')}"
    view = xml_call("str_replace_editor", command="view", path="/repo/pkg/core/scale.py", view_range="[40, 60]")
    lines = "\n".join(f"    {n}\t        if part_{n} is None: factor_{n} = combine(lhs, rhs)" for n in range(40, 60))
    shown = f"OBSERVATION:\nHere's the result of running `cat -n` on /repo/pkg/core/scale.py:\n{lines}"
    script = xml_call("str_replace_editor", command="create", path="/repo/reproduce.py", file_text="scale(x).evalf()")
    turns = [("", f"Let me write a script that reproduces the failure:\n\n{script}")]
    turns.append(("OBSERVATION:\nFile created successfully at: /repo/reproduce.py", rerun))
    for i, error in enumerate(errors):
        told = run_output(error)
        if verify:
            turns.append((told, check))
            told = "OBSERVATION:\ncase 1: ok\ncase 2: ok\ncase 3: ok\nAll 3 verification cases pass."
        if i >= reread:  # the error did not tell where: look at the code again before the next fix
            turns.append((told, f"We still have an issue. Let's look at `scale` again:\n\n{view}"))
            turns.append((shown, fix(f"elif part_{i}", f"else: part_{i} = None")))
        else:
            turns.append((told, fix(f"elif part_{i}", f"else: part_{i} = None")))
        confirmed = f"OBSERVATION:\nThe file /repo/pkg/core/scale.py has been edited: `else: part_{i} = None`."
        turns.append((confirmed, rerun))
    return turns


def error(line: int, name: str) -> str:
    """A traceback through frames of its own: what a changed error brings."""
    frames = "\n".join(
        f'  File "/repo/pkg/core/{name}_{n}.py", line {line + n}, in {name}_step_{n}\n    {name}_{n} = {name}({n})'
        for n in range(4)
    )
    return f"{frames}\nUnboundLocalError: local variable {name!r} referenced before assignment"


async def test_a_fix_whose_check_has_not_run_yet_is_judged_with_its_output() -> None:
    """Each fix changes what the script prints, but one fix misses and the agent re-reads the lines and edits
    again: the edit, the unchanged run and the re-read are old text. The agent's checks print something else
    after its edits, so its new edit is judged with the output of the next run (here another error)."""
    errors = [error(1287, "rf"), error(1310, "reprec"), error(1313, "imprec"), error(1313, "imprec")]
    errors += [error(1077, "mpf"), error(88, "norm")]
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(fixing(errors)))) is None


async def test_a_fix_checked_by_two_commands_is_judged_with_the_last_ones_output() -> None:
    """After each edit the script and then a second check run again; a fix that misses is re-read and edited
    again: the new edit waits for the outputs of both checks."""
    errors = [error(1287, "rf"), error(1310, "reprec"), error(1313, "imprec"), error(1313, "imprec")]
    errors += [error(1077, "mpf"), error(88, "norm")]
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(fixing(errors, verify=True, reread=3)))) is None


async def test_fixes_whose_check_prints_the_same_whatever_is_edited_are_stopped() -> None:
    """The same session, every run printing the same error: new edits that change nothing the agent sees."""
    turns = fixing([error(1310, "reprec")] * 6)
    assert first_trip(await RunSimulator([TextLoop()]).run(shell(turns))) == 11  # after the re-read and the edit


FIELDS = "/repo/pkg/util/fields.py"
BASE = "/repo/pkg/domains/base.py"


def numbered(lines: range) -> str:
    """Lines of a module about typed fields, as the editor's `cat -n` shows them."""
    code = [
        f"{n:6}\t    def part_{n}(self, role_{n % 7}, domain, target_{n % 5}):  # builds cross reference {n}"
        if n % 4 == 0
        else f"{n:6}\t        node_{n} = make_node(kind_{n % 9}, role_{n % 7}, rows[{n}])  # step {n} of the field"
        for n in lines
    ]
    return f"OBSERVATION:\nHere's the result of running `cat -n` on {FIELDS}:\n" + "\n".join(code)


def look(sentence: str, **parameters: str) -> str:
    tool = "bash" if "command" in parameters else "str_replace_editor"
    call = xml_call(tool, **parameters) if tool == "bash" else xml_call(tool, command="view", **parameters)
    return f"{sentence}\n\n{call}"


def rereading_then_searching() -> list[tuple[str, str]]:
    """A text agent shown a module whole, then going over the same steps again (the same grep and the same
    window of it, old text), that greps for a name no command of its named before (`make_xrefs`): what it
    finds is told after that answer. Then it greps for a name that is not there, in two files by turns."""
    sentence = "Let's look at how the typed field builds its cross references"
    klass = (
        "OBSERVATION:\n40:class Typed(Grouped):",
        look(f"{sentence}, in the class:", path=FIELDS, view_range="[40, 60]"),
    )
    cycle = [
        (NOTHING, look(f"{sentence}, from its class:", command=f'grep -n "class Typed" {FIELDS}')),
        klass,
        (numbered(range(40, 61)), look(f"{sentence}, through its type:", command=f'grep -n "process_type" {FIELDS}')),
    ]
    turns = [("", look(f"{sentence}:", path=FIELDS))]
    turns.append(
        (numbered(range(1, 120)), look(f"{sentence}, through its type:", command=f'grep -n "process_type" {FIELDS}'))
    )
    turns += cycle
    turns.append((NOTHING, look(f"{sentence}, from its class:", command=f'grep -n "^class Typed" {FIELDS}')))
    turns.append(klass)
    turns.append(
        (numbered(range(40, 61)), look(f"{sentence}, through make_xrefs:", command=f'grep -n "make_xrefs" {FIELDS}'))
    )
    found = "OBSERVATION:\n" + "\n".join(
        f"{n}:    def make_xrefs_{n}(self, rolename, domain, target, innernode):" for n in (44, 48, 52)
    )
    turns.append((found, look(f"{sentence}, in make_xrefs:", path=FIELDS, view_range="[44, 52]")))
    turns.append(
        (
            numbered(range(44, 53)),
            look(f"{sentence}, in the docstring:", command=f'grep -n "def process_docstring" {FIELDS}'),
        )
    )
    for i in range(8):
        turns.append(
            (
                NOTHING,
                look(
                    f"{sentence}, in the docstring:", command=f'grep -n "def process_docstring" {(BASE, FIELDS)[i % 2]}'
                ),
            )
        )
    return turns


async def test_a_new_search_after_rereading_is_judged_with_what_it_finds() -> None:
    """The re-read and the new grep after it add almost nothing (the same window again, a sentence said
    before): before its answer, three stale turns. The grep names a name no command named, so it is judged
    with what it finds, new lines here; the greps that follow, in turn for a name that is not there, stop it."""
    turns = rereading_then_searching()
    results = await RunSimulator([TextLoop()]).run(shell(turns))
    assert not results[8].tripped() and results[8].blocked_by is None  # the grep's answer is read
    assert first_trip(results) == 14  # the third grep run again
    assert results[13].one("text_loop").evidence["new_shares"] == [0.0, 0.0, 0.0]
