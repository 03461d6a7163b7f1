"""`spiral`: near-identical arguments among one tool's latest calls."""

from __future__ import annotations

from runguard.detectors.spiral import MAX_TOOLS, Spiral, SpiralConfig
from tests.detectors.harness import RunSimulator, Turn, agent_loop, first_trip, shows, with_handoffs

BASE = "ai agent cost control production budget enforcement guide for teams"
WORDS = ["2026", "pricing", "examples", "overview", "tutorial", "checklist"]


def rephrasings(n: int) -> list[list[tuple[str, object, object]]]:
    """Each query adds one word to the same question: every pair stays above 0.72."""
    return [[("web_search", {"query": f"{BASE} {' '.join(WORDS[:i])}"}, f"results {i}")] for i in range(n)]


async def test_trips_at_the_third_near_identical_call() -> None:
    results = await RunSimulator([Spiral()]).run(agent_loop(rephrasings(5)))
    # Three calls give three similar pairs: the seed's rule fires on the third call.
    assert first_trip(results) == 3
    finding = results[2].one("spiral")
    assert [c["request_seq"] for c in shows(finding, "calls")["calls"]] == [1, 2, 3]
    assert finding.action == "block"
    assert results[2].response  # judged after the response: the breaker stops the next request
    assert results[3].blocked_by == "spiral"
    assert "tool 'web_search'" in finding.reason
    assert "3 pairs" in finding.reason


async def test_pagination_through_one_tool_passes() -> None:
    pages = [
        [("list_files", {"folder": "reports/2026", "page_size": 50, "page": i + 1}, f"files {i}")] for i in range(10)
    ]
    cursors = [[("list_files", {"folder": "reports/2026", "cursor": f"c{i:04d}"}, f"files {i}")] for i in range(10)]
    for turns in (pages, cursors):
        assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(turns))) is None


async def test_identical_arguments_are_not_a_spiral() -> None:
    polls = [[("job_status", {"job_id": "j-1"}, f"running {i}")] for i in range(8)]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(polls))) is None


async def test_a_long_plan_with_distinct_steps_passes() -> None:
    topics = ["market size", "pricing models", "open source tools", "case studies", "regulation", "hiring trends"]
    turns = [[("web_search", {"query": f"ai agents {topic}"}, f"r{i}")] for i, topic in enumerate(topics)]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(turns))) is None


async def test_similar_calls_of_different_tools_are_not_compared() -> None:
    turns = [[(f"search_{i}", {"query": f"{BASE} {' '.join(WORDS[:i])}"}, "r")] for i in range(5)]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(turns))) is None


async def test_a_stricter_threshold_may_be_configured() -> None:
    config = SpiralConfig(threshold=0.95)
    assert first_trip(await RunSimulator([(Spiral(), config)]).run(agent_loop(rephrasings(5)))) is None
    assert SpiralConfig.model_fields["threshold"].json_schema_extra == {"tighten": "lower"}


async def test_windows_are_kept_for_a_bounded_number_of_tools() -> None:
    sim = RunSimulator([Spiral()])
    many = [[(f"tool_{i}", {"query": BASE}, "r")] for i in range(MAX_TOOLS + 4)]
    await sim.run(agent_loop(many))
    fields = await sim.run_fields()
    assert sum(1 for name in fields if name.startswith("spiral.w.")) == MAX_TOOLS


async def test_similar_calls_of_one_response_are_a_batch_not_a_spiral() -> None:
    """A spiral asks again after seeing the answers; calls of one response were all made before any came
    (a near-identical pair there is `parallel_calls`'). The same calls one turn after another spiral."""
    batch = [("web_search", {"query": f"{BASE} {' '.join(WORDS[:i])}"}, "r") for i in range(3)]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop([batch]))) is None
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop([[call] for call in batch]))) == 3


async def test_a_plan_of_similar_tasks_and_one_more_later_is_not_a_spiral() -> None:
    """Agno's task mode: the leader creates a task per region in one response, and one more later; the later
    one is like each of the batch's, which asks again once, not four times."""
    regions = ["north", "south", "east", "west", "central"]

    def task(region: str) -> tuple[str, object, object]:
        args = {"title": f"Analyse {region} sales", "description": f"Analyse the {region} region's sales."}
        return ("create_task", args, f"Task created: {region}")

    turns = [[task(region) for region in regions[:4]], [task(regions[4])]]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(turns))) is None
    # One turn after another, the same calls meet the seed's rule (three similar pairs of turns).
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop([[task(r)] for r in regions]))) == 3


async def test_reading_sibling_files_is_not_a_spiral() -> None:
    # The paths share every directory; each names another file (one word, not five shared ones).
    files = ["users", "orders", "auth", "billing", "search"]
    turns = [[("read_file", {"path": f"services/api/src/handlers/{name}.py"}, f"code {name}")] for name in files]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(turns))) is None


async def test_fixed_options_do_not_make_different_queries_near_identical() -> None:
    options = {"search_depth": "advanced", "topic": "finance", "time_range": "year"}
    facets = ["revenue", "deliveries", "gross margin", "operating income", "free cash flow"]
    turns = [
        [("web_search", {"query": f"tesla q3 2024 {facet}", **options}, f"r{i}")] for i, facet in enumerate(facets)
    ]
    jira = [
        [("search_issues", {"jql": "project = API AND status = Open", "startAt": 50 * i}, f"p{i}")] for i in range(5)
    ]
    for run in (turns, jira):
        assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(run))) is None


async def test_rephrasings_with_fixed_options_still_trip() -> None:
    options = {"max_results": 5, "search_depth": "advanced"}
    turns = [[(name, {**args, **options}, out) for name, args, out in turn] for turn in rephrasings(5)]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(turns))) == 3


async def test_a_leader_handing_its_members_similar_tasks_is_not_a_spiral() -> None:
    """An Agno leader fanning out one analysis per region: similar texts, each another agent's work."""
    regions = ["North", "South", "East", "West", "Central"]
    tasks = [f"Analyse the sales data for the {region} region and report its growth" for region in regions]
    handed = [[("delegate_task_to_member", {"member_id": "analyst", "task": task}, "done")] for task in tasks]
    assert first_trip(await RunSimulator([Spiral()]).run(with_handoffs(agent_loop(handed)))) is None
    # The same texts without the names' capitals (nothing tells them apart but a word), as queries: a spiral.
    searched = [[("search", {"query": task.lower()}, "no hits")] for task in tasks]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(searched))) == 3


STEPS = ["Read the failing test", "Find the bug in the parser", "Fix the off-by-one error", "Run the test suite"]


def todo_list(done: int) -> list[dict[str, str]]:
    """The agent's to-do list after `done` steps, as coding agents rewrite it whole at every step."""
    status = ["completed"] * done + ["in_progress"] + ["pending"] * len(STEPS)
    return [{"content": step, "status": status[i]} for i, step in enumerate(STEPS)]


async def test_a_to_do_list_rewritten_at_every_step_is_not_a_spiral() -> None:
    """Claude Code's TodoWrite, deepagents' write_todos, Codex's update_plan: one status changes a call."""
    turns: list[Turn] = []
    for done in range(len(STEPS)):
        turns.append([("write_todos", {"todos": todo_list(done)}, "Updated todo list")])
        turns.append([("update_plan", {"plan": [{"step": s, "status": "pending"} for s in STEPS[done:]]}, "ok")])
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(turns))) is None


async def test_shell_commands_on_other_files_are_not_a_spiral() -> None:
    """A coding agent running one test file after another, or reading them: the same command line but
    for the file it names. The same command on the same files, reworded, still is one."""
    files = ["parser", "lexer", "printer", "ast"]
    runs = [
        [("bash", {"command": f"python -m pytest tests/test_{f}.py -x -q"}, f"{i} passed")] for i, f in enumerate(files)
    ]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(runs))) is None
    flags = ["-x -q", "-x -q --tb=short", "-x -q -vv", "-x -q --lf"]
    reruns = [[("bash", {"command": f"python -m pytest tests/test_parser.py {f}"}, "1 failed")] for f in flags]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(reruns))) is not None


async def test_queries_for_other_years_or_orders_are_not_a_spiral() -> None:
    """A data agent asking the same question of each year, a mail merge: the numbers are what changes."""
    sql = "SELECT region, SUM(amount) AS total FROM orders WHERE year = {} GROUP BY region ORDER BY total DESC"
    years = [[("run_sql", {"sql": sql.format(year)}, f"rows {year}")] for year in range(2019, 2024)]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(years))) is None
    body = "Hi, your order {} has shipped today and should arrive within three to five working days."
    mails = [[("send_email", {"to": "ann@example.com", "body": body.format(n)}, "sent")] for n in range(1041, 1046)]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(mails))) is None


async def test_the_same_question_about_other_named_things_is_not_a_spiral() -> None:
    """The weather for one city after another: a capitalised word inside the text names what is asked about."""
    cities = ["Paris", "Lyon", "Marseille", "Toulouse"]
    asked = [[("web_search", {"query": f"weather forecast for {city} this weekend"}, city)] for city in cities]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(asked))) is None
    # Rephrasings that keep their names, and add a year, are still compared.
    rephrased = [f"{BASE} on Kubernetes {' '.join(WORDS[:i])}" for i in range(5)]
    queries = [[("web_search", {"query": query}, "no luck")] for query in rephrased]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(queries))) == 3


async def test_code_or_sql_on_other_quoted_literals_is_not_a_spiral() -> None:
    """A data agent grouping by one column after another, or querying one region after another."""
    code = "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df.groupby('{}')['revenue'].sum().head(10))"
    columns = ["region", "product", "channel", "segment"]
    runs = [[("run_python", {"code": code.format(column)}, f"by {column}")] for column in columns]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(runs))) is None
    sql = "SELECT product, SUM(amount) FROM orders WHERE region = '{}' GROUP BY product ORDER BY 2 DESC"
    queries = [[("run_sql", {"sql": sql.format(region)}, region)] for region in ["north", "south", "east", "west"]]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(queries))) is None


SCRIPT = """import csv

def total(path):
    with open(path) as f:
        return sum(float(row["amount"]) for row in csv.DictReader(f))

print(total("sales.csv"))
"""
FIXES = ['float(row["amount"] or 0)', 'float(row.get("amount") or 0)', 'float(row.get("amount", "0").strip() or 0)']


async def test_a_coding_agent_editing_its_script_again_and_again_is_not_a_spiral() -> None:
    """Each version fixes one line and gets another error: work, not a rephrased question. A script's or a
    file's text (three lines or more) is data the call writes; run again unchanged, it is `repeat_call`'s."""
    versions = [SCRIPT, *(SCRIPT.replace('float(row["amount"])', fix) for fix in FIXES)]
    runs = [[("run_python", {"code": v}, f"ValueError {i}")] for i, v in enumerate(versions)]
    writes = [[("write_file", {"path": "report.py", "content": v}, "written")] for v in versions]
    nested = [[("apply_edit", {"edit": {"file": "report.py", "text": v}}, "ok")] for v in versions]
    for turns in (runs, writes, nested):
        assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(turns))) is None


async def test_two_rephrasings_a_turn_spiral_by_the_third_turn() -> None:
    """A batch is kept whole beside the window's earlier calls, so a model asking twice a turn is judged by
    its turns as one asking once a turn is."""
    queries = [f"{BASE} {' '.join(WORDS[:i])}" for i in range(6)]
    turns = [[("web_search", {"query": q}, "r"), ("web_search", {"query": q + " now"}, "r")] for q in queries[::2]]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(turns))) == 3


FLAGS = ["-x -q", "-x -q --tb=short", "-x -q -vv", "-x -q --lf", "-x -q -p no:cacheprovider"]


async def test_a_command_reworded_for_the_same_answer_trips_as_early_as_before() -> None:
    """The loop `spiral` is for: the same tests run with other flags, failing the same way every time (a
    countdown the client appends changes nothing)."""
    reruns = [
        [("bash", {"command": f"python -m pytest tests/test_parser.py {f}"}, f"1 failed\n[{900 - i} tokens left]")]
        for i, f in enumerate(FLAGS)
    ]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(reruns))) == 4


async def test_reading_code_grep_after_grep_with_new_answers_is_not_a_spiral() -> None:
    """grep after grep in one file, each showing more of the code: the words overlap, every answer is new."""
    asked = [
        "-n 'def load_config'",
        "-A20 'def load_config'",
        "-B5 -A20 'def load_config'",
        "-n -A40 'def load_config'",
    ]
    reads = [
        [("bash", {"command": f"grep {how} src/cli/settings.py"}, f"{40 * i}: line {i} of the function")]
        for i, how in enumerate(asked)
    ]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(reads))) is None


async def test_tests_run_four_ways_failing_four_ways_are_not_a_spiral() -> None:
    failures = [
        "E   ImportError: cannot import name 'Config'",
        "E   AttributeError: 'Config' object has no attribute 'env'",
        "E   AssertionError: assert 'prod' == 'dev'",
        "E   KeyError: 'DATABASE_URL'",
        "2 passed",
    ]
    runs = [
        [("execute_command", {"command": f"python -m pytest tests/test_config.py {f}"}, out)]
        for f, out in zip(FLAGS, failures, strict=True)
    ]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(runs))) is None


def booking_attempts(sums: list[tuple[str, str]]) -> list[Turn]:
    """A customer-service agent totting up a fare between failed bookings: each calculation, then a booking."""
    turns: list[Turn] = []
    for expression, total in sums:
        turns.append([("calculate", {"expression": expression}, total)])
        turns.append([("book_reservation", {"amount": total}, f"Error: the total is 375, not {total}")])
    return turns


async def test_a_sum_corrected_with_a_new_answer_each_time_is_not_a_spiral() -> None:
    """The agent adds the fee it missed, then corrects it by one: the expressions share their numbers, but a
    calculation's answer is what it means, and every answer is new (a booking between each)."""
    sums = [("500 - (158 + 141)", "201.0"), ("158 + 141", "299.0"), ("158 + 141 + 75", "374.0")]
    sums.append(("158 + 141 + 76", "375.0"))
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(booking_attempts(sums)))) is None


async def test_a_sum_reworded_for_the_same_answer_still_trips() -> None:
    """The same sum padded a new way each time gets the same answer: asking again after the same answer trips
    where the words alone tripped (the fourth calculation makes the third near pair)."""
    sums = [("158 + 141 + 75", "374.0"), ("158 + 141 + 75 + 0", "374.0"), ("158 + 141 + 75 * 1", "374.0")]
    sums += [("158 + 141 + 75 - 0", "374.0")]
    assert first_trip(await RunSimulator([Spiral()]).run(agent_loop(booking_attempts(sums)))) == 7
