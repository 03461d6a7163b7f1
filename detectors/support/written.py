"""What a text agent's answer writes as its action, read from the answer's text.

Agents that keep their tool protocol out of the API's tool fields write their action in the answer: SWE-agent
1.x an XML-style call (`<function=bash><parameter=command>grep -n x a.py</parameter></function>`), SWE-agent
0.x and mini-swe-agent a fenced block (```` ```\nopen src/Parser.java\n``` ````). `text_loop` keeps per turn
what that action is (`action`, `wording`), where it works (`places`), whether it writes a file (`edits`) or
only reads (`asked`, with the names it asks about), and whether what the turn was told only says the last
command ran (`quiet`). Each reads the answer's first `shingles.MAX_CHARS` characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from runguard.detectors.support.commands import trivial_output
from runguard.detectors.support.shingles import MAX_CHARS
from runguard.proxy.core.events import ToolResult, digest

MAX_TARGETS = 8  # places an action names, kept per turn
_BLOCK = re.compile(r"```[\w+-]*\n(.*?)```", re.DOTALL)  # a fenced block: how text agents write their action
_PLACE = re.compile(r"\d+|[\w.-]*/[\w./-]+|[\w-]+\.[a-z]{1,5}\b")  # a number, a path, a file name
_CALL = re.compile(r"<function=[^>\n]{1,64}>.*?</function>", re.DOTALL)  # a call written as XML-style text
_EDIT = re.compile(  # an action that writes a file: an editor's write, `edit N:M`, `sed -i`, a patch, a heredoc
    r"<parameter=command>\s*(?:str_replace|create|insert)\b|^\s*edit\s+\d+(?::\d+)?\s*$|\bsed\s+-i|\btee\s"
    r"|\b(?:git\s+apply|patch\s+-p|apply_patch)\b|<<-?\s*['\"]?\w+['\"]?\s*>\s*\S|\bcat\s*>\s*\S",
    re.MULTILINE,
)
_SPACES = re.compile(r"\s+")
_DIGITS = re.compile(r"\d+")
_TAG = re.compile(r"</?(?:function|parameter)(?:=[^>\n]{0,64})?>")  # an XML-style call's own tags
_PARAMETER = re.compile(r"<parameter=(\w{1,32})>(.*?)</parameter>", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")  # a name a command asks for: a symbol, a file, a folder
MAX_WORDS = 24  # words of a command kept per turn
_STEP = re.compile(r"&&|\|\||[;|\n]")  # where a shell command chains the next one
_WRITES = re.compile(r"(?<![0-9&])>(?!&|\s*/dev/null)")  # an output written to a file: `> f`, `>> f`
_READER = re.compile(  # programs (and text agents' own commands) that only read
    r"cat|head|tail|nl|wc|less|more|e?grep|fgrep|rg|ag|ack|find|ls|tree|file|stat|pwd|cd|echo|which|type|sed|awk"
    r"|cut|sort|uniq|diff|cmp|open|goto|scroll_(?:up|down)|search_(?:file|dir)|find_file"
)
_GIT_READER = re.compile(r"log|show|diff|status|grep|blame|ls-files")  # git's subcommands that only read


def places(answer: str) -> frozenset[str]:
    """Where the answer's action works: the numbers, paths and file names of the first line of its last fenced
    block ("edit 46:46", "open src/Parser.java"), hashed; none when it writes no block."""
    blocks = _BLOCK.findall(answer[:MAX_CHARS])
    lines = blocks[-1].strip().split("\n", 1) if blocks else []
    found = _PLACE.findall(lines[0]) if lines else []
    return frozenset(digest(place, 2) for place in found[:MAX_TARGETS])


def written(answer: str) -> str:
    """The action the answer writes: its last `<function=...>` call, else its last fenced block; "" for none."""
    text = answer[:MAX_CHARS]
    found = _CALL.findall(text) or _BLOCK.findall(text)
    return found[-1] if found else ""


def action(answer: str) -> str:
    """A digest of the action the answer writes, spaces collapsed; "" when it writes none."""
    found = written(answer)
    return digest(_SPACES.sub(" ", found).strip(), 4) if found else ""


def edits(answer: str) -> bool:
    """Whether the answer's action writes a file: an editor's `str_replace`/`create`/`insert`, `edit 46:46`,
    `sed -i`, a patch applied, a heredoc written to a file."""
    return bool(_EDIT.search(written(answer)))


def wording(answer: str) -> str:
    """A digest of the answer's words, its numbers and spacing aside: one answer for "view lines 620-630" and
    then "view lines 610-620" under the same sentence."""
    return digest(_DIGITS.sub("#", _SPACES.sub(" ", answer[:MAX_CHARS])).strip(), 4)


def only_reads(command: str) -> bool:
    """Whether a shell command (or a text agent's own command: `open`, `search_dir`) only reads: each of its
    chained steps runs a reading program (`grep`, `sed -n`, `git log`, ...), none writes to a file (`> f`,
    `sed -i`, `find -delete`)."""
    steps = [step for step in map(str.split, _STEP.split(command)) if step]
    if not steps or _WRITES.search(command):
        return False
    for step in steps:
        program = step[0].rsplit("/", 1)[-1]
        git = program == "git" and len(step) > 1 and _GIT_READER.fullmatch(step[1])
        if not (_READER.fullmatch(program) or git):
            return False
        if "-delete" in step or ("sed" in step and any(word.startswith(("-i", "--in-place")) for word in step)):
            return False
    return True


def asked(answer: str) -> tuple[bool, frozenset[str]]:
    """Whether the answer's action only reads (a file viewed, a `grep`, a listing) and the names it asks
    about (its words of three characters or more, numbers and an XML-style call's tags aside), hashed."""
    found = written(answer)
    if not found:
        return False, frozenset()
    if found.startswith("<function="):  # an editor's call names a path, a shell's a command
        parameters = dict(_PARAMETER.findall(found))
        command = parameters.get("command", "").strip()
        reads = command == "view" if "path" in parameters else only_reads(command)
    else:
        reads = only_reads(found)
    words = dict.fromkeys(word.casefold() for word in _WORD.findall(_TAG.sub(" ", found)))
    return reads, frozenset(digest(word, 2) for word in list(words)[:MAX_WORDS])


def quiet(texts: Sequence[str]) -> bool:
    """Whether what the turn was told only says the last command ran (it printed nothing): a `grep` that
    matched nothing, a file written (`commands.trivial_output`)."""
    return bool(texts) and trivial_output(ToolResult(None, None, "\n".join(texts)))
