/* `normalize._VOLATILE.sub("#", text)` in C: the volatile parts of a tool result (countdowns, UUIDs, ids,
 * timestamps, times, durations, addresses, long hex ids) each replaced by "#".
 *
 * Python's `re` tries the pattern at every position of the text, about 40 ns a character; this reads each
 * alternative by hand, in the pattern's order and with its backtracking, at a few ns a character. It reads
 * ASCII, where `\w`, `\d`, `\s` and IGNORECASE mean what they do below. A character beyond ASCII that the
 * pattern reads only as punctuation it names nowhere (an arrow, an emoji, a box's line: no letter, digit or
 * space of any script, nor one that IGNORECASE folds to ASCII, as the Kelvin sign does to "k") is read as "?";
 * a text with any other returns None, and the regex reads it. tests/detectors/support/test__volatile.py
 * compares it with the regex on generated texts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_ascii.h"

typedef struct {
    const Py_UCS1 *s;
    Py_ssize_t n;
} Text;

static int at(const Text *t, Py_ssize_t i) { return i >= 0 && i < t->n ? t->s[i] : -1; }

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int is_hex(int c) { return is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'f'); }

/* \b at `i`: a word character on one side only. */
static int boundary(const Text *t, Py_ssize_t i) { return is_word(at(t, i - 1)) != is_word(at(t, i)); }

/* `word` (lowercase) at `i`, any case: the position after it, or -1. */
static Py_ssize_t literal(const Text *t, Py_ssize_t i, const char *word) {
    for (; *word; word++, i++) {
        if (lower(at(t, i)) != *word) {
            return -1;
        }
    }
    return i;
}

static Py_ssize_t run_of(const Text *t, Py_ssize_t i, int (*test)(int)) {
    while (i < t->n && test(t->s[i])) {
        i++;
    }
    return i;
}

/* `count` characters passing `test` from `i`: the position after them, or -1. */
static Py_ssize_t exactly(const Text *t, Py_ssize_t i, int (*test)(int), int count) {
    for (; count > 0; count--, i++) {
        if (!test(at(t, i))) {
            return -1;
        }
    }
    return i;
}

/* \d[\d,]*(?=\s+tokens?\s+(?:left|remaining)) -- the lookahead needs a space right after, so only the
 * longest run of digits and commas can end a match. */
static Py_ssize_t countdown(const Text *t, Py_ssize_t p) {
    Py_ssize_t end = p + 1;
    while (is_digit(at(t, end)) || at(t, end) == ',') {
        end++;
    }
    Py_ssize_t i = run_of(t, end, is_space);
    if (i == end || (i = literal(t, i, "token")) < 0) {
        return -1;
    }
    Py_ssize_t spaces = lower(at(t, i)) == 's' ? i + 1 : i; /* tokens?: a space must follow either way */
    Py_ssize_t after = run_of(t, spaces, is_space);
    if (after == spaces) {
        return -1;
    }
    return literal(t, after, "left") >= 0 || literal(t, after, "remaining") >= 0 ? end : -1;
}

/* [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b */
static Py_ssize_t uuid(const Text *t, Py_ssize_t p) {
    static const int groups[] = {8, 4, 4, 4, 12};
    Py_ssize_t i = p;
    for (int g = 0; g < 5; g++) {
        if (g && at(t, i++) != '-') {
            return -1;
        }
        if ((i = exactly(t, i, is_hex, groups[g])) < 0) {
            return -1;
        }
    }
    return boundary(t, i) ? i : -1;
}

/* \s*[\w-]{6,} after a keyed id: the spaces and the id's characters are apart, so both are read whole. */
static int is_id(int c) { return is_word(c) || c == '-'; }

static Py_ssize_t id_value(const Text *t, Py_ssize_t i) {
    Py_ssize_t start = run_of(t, i, is_space);
    Py_ssize_t end = run_of(t, start, is_id);
    return end - start >= 6 ? end : -1;
}

/* id\b[:=#]?\s*[\w-]{6,} from `i` */
static Py_ssize_t id_from(const Text *t, Py_ssize_t i) {
    if ((i = literal(t, i, "id")) < 0 || !boundary(t, i)) {
        return -1;
    }
    int c = at(t, i);
    Py_ssize_t end = c == ':' || c == '=' || c == '#' ? id_value(t, i + 1) : -1;
    return end >= 0 ? end : id_value(t, i);
}

/* (?:chunk|trace|request|session|call|run)[ _-]?id\b[:=#]?\s*[\w-]{6,} */
static Py_ssize_t keyed_id(const Text *t, Py_ssize_t p) {
    static const char *keys[] = {"chunk", "trace", "request", "session", "call", "run"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        Py_ssize_t i = literal(t, p, keys[k]);
        if (i < 0) {
            continue;
        }
        int c = at(t, i);
        Py_ssize_t end = c == ' ' || c == '_' || c == '-' ? id_from(t, i + 1) : -1;
        return end >= 0 ? end : id_from(t, i); /* the keys differ by their first two letters: one at most */
    }
    return -1;
}

/* \d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})? -- nothing follows it, so
 * each optional part is taken when it is there. */
static Py_ssize_t timestamp(const Text *t, Py_ssize_t p) {
    Py_ssize_t i = exactly(t, p, is_digit, 4);
    if (i < 0 || at(t, i) != '-' || (i = exactly(t, i + 1, is_digit, 2)) < 0 || at(t, i) != '-' ||
        (i = exactly(t, i + 1, is_digit, 2)) < 0) {
        return -1;
    }
    if ((lower(at(t, i)) != 't' && at(t, i) != ' ') || (i = exactly(t, i + 1, is_digit, 2)) < 0 || at(t, i) != ':' ||
        (i = exactly(t, i + 1, is_digit, 2)) < 0) {
        return -1;
    }
    if (at(t, i) == ':' && exactly(t, i + 1, is_digit, 2) >= 0) {
        i += 3;
        if ((at(t, i) == '.' || at(t, i) == ',') && is_digit(at(t, i + 1))) {
            i = run_of(t, i + 1, is_digit);
        }
    }
    int c = at(t, i);
    if (lower(c) == 'z') {
        return i + 1;
    }
    if ((c == '+' || c == '-') && exactly(t, i + 1, is_digit, 2) >= 0) {
        Py_ssize_t j = i + 3;
        if (at(t, j) == ':' && exactly(t, j + 1, is_digit, 2) >= 0) {
            return j + 3;
        }
        if (exactly(t, j, is_digit, 2) >= 0) {
            return j + 2;
        }
    }
    return i;
}

/* \d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b -- a fraction whose end is no boundary gives way to none at all (its
 * shorter forms end between two digits). */
static Py_ssize_t time_of_day(const Text *t, Py_ssize_t p) {
    Py_ssize_t i = exactly(t, p, is_digit, 2);
    if (i < 0 || at(t, i) != ':' || (i = exactly(t, i + 1, is_digit, 2)) < 0 || at(t, i) != ':' ||
        (i = exactly(t, i + 1, is_digit, 2)) < 0) {
        return -1;
    }
    if ((at(t, i) == '.' || at(t, i) == ',') && is_digit(at(t, i + 1))) {
        Py_ssize_t end = run_of(t, i + 1, is_digit);
        if (boundary(t, end)) {
            return end;
        }
    }
    return boundary(t, i) ? i : -1;
}

/* (?:ms|s|sec|secs|seconds)\b at `i`, the first of them in that order that ends at a boundary. */
static Py_ssize_t unit(const Text *t, Py_ssize_t i) {
    static const char *units[] = {"ms", "s", "sec", "secs", "seconds"};
    for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
        Py_ssize_t end = literal(t, i, units[u]);
        if (end >= 0 && boundary(t, end)) {
            return end;
        }
    }
    return -1;
}

/* \d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b -- shorter digits would leave a digit before the unit. */
static Py_ssize_t duration(const Text *t, Py_ssize_t p) {
    Py_ssize_t i = run_of(t, p, is_digit);
    if (at(t, i) == '.' && is_digit(at(t, i + 1))) {
        i = run_of(t, i + 1, is_digit);
    }
    Py_ssize_t end = is_space(at(t, i)) ? unit(t, i + 1) : -1;
    return end >= 0 ? end : unit(t, i);
}

/* 0x[0-9a-f]{6,}\b and [0-9a-f]{32,}\b: only the longest run of hex digits can end at a boundary. */
static Py_ssize_t hex_run(const Text *t, Py_ssize_t i, Py_ssize_t least) {
    Py_ssize_t end = run_of(t, i, is_hex);
    return end - i >= least && boundary(t, end) ? end : -1;
}

static Py_ssize_t address(const Text *t, Py_ssize_t p) {
    return at(t, p) == '0' && lower(at(t, p + 1)) == 'x' ? hex_run(t, p + 2, 6) : -1;
}

/* The pattern at `p`: its alternatives in order, the first that matches. */
static Py_ssize_t volatile_at(const Text *t, Py_ssize_t p) {
    int c = t->s[p];
    int first = lower(c);
    if (!is_digit(c) && !(first >= 'a' && first <= 'f') && first != 'r' && first != 's' && first != 't') {
        return -1;
    }
    Py_ssize_t end;
    if (is_digit(c) && (end = countdown(t, p)) >= 0) {
        return end;
    }
    if ((end = uuid(t, p)) >= 0 || (end = keyed_id(t, p)) >= 0) {
        return end;
    }
    if (is_digit(c) && ((end = timestamp(t, p)) >= 0 || (end = time_of_day(t, p)) >= 0 ||
                        (end = duration(t, p)) >= 0 || (end = address(t, p)) >= 0)) {
        return end;
    }
    return hex_run(t, p, 32);
}

/* The end of the volatile part at `p`, or -1: the pattern's (?<![\w-]) first, then its alternatives. */
static Py_ssize_t match_at(const Text *t, Py_ssize_t p) {
    int before = at(t, p - 1);
    return is_word(before) || before == '-' ? -1 : volatile_at(t, p);
}

/* Whether the pattern reads a character beyond ASCII as anything but punctuation it names nowhere: \w (a
 * letter or digit of any script), \s, or a letter that IGNORECASE folds to ASCII (dotted and dotless i, the
 * long s, the Kelvin sign). test__volatile.py checks this against the regex for every code point. */
static int read_by_pattern(Py_UCS4 c) {
    return Py_UNICODE_ISALNUM(c) || Py_UNICODE_ISSPACE(c) || c == 0x130 || c == 0x131 || c == 0x17F || c == 0x212A;
}

/* `text` with each match in `t` (the text itself, or its masked copy) replaced by "#", its other characters
 * as they are: written in `text`'s own kind (a match is one character or more: never longer). */
static PyObject *replaced(const Text *t, PyObject *text) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    void *out = PyMem_Malloc(((size_t)t->n + 1) * (size_t)kind);
    if (out == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t written = 0;
    for (Py_ssize_t p = 0; p < t->n;) {
        Py_ssize_t end = match_at(t, p);
        if (end > p) {
            PyUnicode_WRITE(kind, out, written++, '#');
            p = end;
        } else {
            PyUnicode_WRITE(kind, out, written++, PyUnicode_READ(kind, data, p));
            p++;
        }
    }
    PyObject *result = PyUnicode_FromKindAndData(kind, out, written);
    PyMem_Free(out);
    return result;
}

/* A text with characters beyond ASCII, each of which the pattern reads as "?" (an arrow, an emoji, a box's
 * line): matched on an ASCII copy with "?" in their places, written out with them. None if the pattern reads
 * one of them otherwise. */
static PyObject *strip_masked(PyObject *text) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_UCS1 *masked = PyMem_Malloc((size_t)n + 1);
    if (masked == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 128 && read_by_pattern(c)) {
            PyMem_Free(masked);
            Py_RETURN_NONE;
        }
        masked[i] = c < 128 ? (Py_UCS1)c : '?';
    }
    Text t = {masked, n};
    PyObject *result = replaced(&t, text);
    PyMem_Free(masked);
    return result;
}

PyDoc_STRVAR(strip_doc,
             "strip(text)\n--\n\n"
             "`text` with each volatile part replaced by \"#\", as normalize._VOLATILE.sub(\"#\", text); None for a "
             "text with a character beyond ASCII that the pattern reads (a letter, a digit, a space): the regex "
             "reads those.");

static PyObject *strip(PyObject *Py_UNUSED(module), PyObject *arg) {
    if (!PyUnicode_Check(arg) || PyUnicode_READY(arg) < 0) {
        PyErr_SetString(PyExc_TypeError, "strip reads a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg)) {
        return strip_masked(arg);
    }
    Text t = {PyUnicode_1BYTE_DATA(arg), PyUnicode_GET_LENGTH(arg)};
    return replaced(&t, arg);
}

static PyMethodDef methods[] = {
    {"strip", strip, METH_O, strip_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_volatile",
    .m_doc = "The volatile parts of a text replaced, in C (see detectors/support/normalize.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__volatile(void) { return PyModule_Create(&module); }
