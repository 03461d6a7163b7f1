/* A call's argument sketch in C: `sketch._sketch_py` for an arguments object whose keys and strings are ASCII and
 * whose values are strings, scalars or lists of objects (most tool calls: a command, a path, a query, a to-do
 * list), without a Python object per word. Anything else (a nested object, a list of scalars, non-ASCII text,
 * `max_args` arguments or more) gets None back, with `names` untouched, and the Python twin reads it.
 *
 * Per argument, in key order: a tag (XXH3-64's low 32 bits of the key and its value, as 8 hex digits) and the
 * 4-hex tokens (XXH3-64's low 16 bits) of its words, the `max_tokens` smallest of the whole call kept. The words
 * and names of free text follow `sketch._text_words` and its regexes (`_WORD`, `_NAME`, `_QUOTED`, `_DIGITS`,
 * `_FILE`), read by hand on ASCII, where `\w`, `\d`, `\s` and `str.lower()` mean what they do below.
 * tests/detectors/support/test__sketching.py compares it with the twin on generated arguments.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "_ascii.h"

static int is_chunk(int c) { return !is_space(c); } /* str.split()'s words are runs of anything else */

static int is_lower_alnum(int c) { return is_digit(c) || (c >= 'a' && c <= 'z'); } /* _WORD: [a-z0-9] */

static int is_upper(int c) { return c >= 'A' && c <= 'Z'; }

static int is_around(int c) { return c != 0 && strchr("'\"`()[]{}<>,;:!?", c) != NULL; } /* sketch._AROUND */

/* The token hashes of one call, argument after argument: argument g's are tokens[starts[g]:starts[g + 1]]. */
typedef struct {
    uint16_t *tokens;
    Py_ssize_t count, room;
} Tokens;

static int token_add(Tokens *found, const char *word, Py_ssize_t size) {
    if (found->count == found->room) {
        Py_ssize_t room = found->room ? found->room * 2 : 64;
        uint16_t *grown = PyMem_Realloc(found->tokens, (size_t)room * sizeof(uint16_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        found->tokens = grown;
        found->room = room;
    }
    found->tokens[found->count++] = (uint16_t)(XXH3_64bits(word, (size_t)size) & 0xFFFF);
    return 0;
}

/* The next run of characters `in_run` takes, from `*at` on: its start (`*at` set to its end), or -1. */
static Py_ssize_t next_run(const char *text, Py_ssize_t size, Py_ssize_t *at, int (*in_run)(int)) {
    Py_ssize_t i = *at;
    while (i < size && !in_run((unsigned char)text[i])) {
        i++;
    }
    Py_ssize_t start = i;
    while (i < size && in_run((unsigned char)text[i])) {
        i++;
    }
    *at = i;
    return start < size ? start : -1;
}

/* Each [a-z0-9] run of `text` (lowercase already) as a token. */
static int runs_add(Tokens *found, const char *text, Py_ssize_t size) {
    Py_ssize_t at = 0, start;
    while ((start = next_run(text, size, &at, is_lower_alnum)) >= 0) {
        if (token_add(found, text + start, at - start) < 0) {
            return -1;
        }
    }
    return 0;
}

static int name_add(PyObject *names, const char *text, Py_ssize_t size) {
    PyObject *name = PyUnicode_FromStringAndSize(text, size);
    if (name == NULL) {
        return -1;
    }
    int failed = PySet_Add(names, name);
    Py_DECREF(name);
    return failed;
}

/* Each \d+ run of `text` as a name. */
static int digits_add(PyObject *names, const char *text, Py_ssize_t size) {
    Py_ssize_t at = 0, start;
    while ((start = next_run(text, size, &at, is_digit)) >= 0) {
        if (name_add(names, text + start, at - start) < 0) {
            return -1;
        }
    }
    return 0;
}

/* _NAME's matches, `(?<=[\w,;)'"] )[A-Z][\w-]*` on `text`, added lowercase (`low` is `text` lowered). */
static int capitalised_add(PyObject *names, const char *text, const char *low, Py_ssize_t size) {
    Py_ssize_t i = 2;
    while (i < size) {
        int before = (unsigned char)text[i - 2];
        if (!(is_upper((unsigned char)text[i]) && text[i - 1] == ' ' &&
              (is_word(before) || (before != 0 && strchr(",;)'\"", before) != NULL)))) {
            i++;
            continue;
        }
        Py_ssize_t end = i + 1;
        while (end < size && (is_word((unsigned char)text[end]) || text[end] == '-')) {
            end++;
        }
        if (name_add(names, low + i, end - i) < 0) {
            return -1;
        }
        i = end;
    }
    return 0;
}

/* _QUOTED's literals, `(['"])([^'"\s]{1,64})\1` (the run stops at any quote, so it is met only in full). */
static int quoted_add(PyObject *names, const char *low, Py_ssize_t size) {
    Py_ssize_t i = 0;
    while (i < size) {
        char quote = low[i];
        if (quote != '\'' && quote != '"') {
            i++;
            continue;
        }
        Py_ssize_t end = i + 1;
        while (end < size && end - i - 1 < 64 && low[end] != '\'' && low[end] != '"' && !is_space((unsigned char)low[end])) {
            end++;
        }
        if (end > i + 1 && end < size && low[end] == quote) {
            if (name_add(names, low + i + 1, end - i - 1) < 0) {
                return -1;
            }
            i = end + 1;
        } else {
            i++;
        }
    }
    return 0;
}

/* _FILE: `\.[a-z0-9]{1,5}$`, an extension ending the name. */
static int has_extension(const char *name, Py_ssize_t size) {
    Py_ssize_t run = 0;
    while (run < size && is_lower_alnum((unsigned char)name[size - 1 - run])) {
        run++;
    }
    return run >= 1 && run <= 5 && run < size && name[size - 1 - run] == '.';
}

/* `sketch._text_words`: the words of free text `text` (stripped, with a space inside) as tokens, what it names
 * added to `names`; `low` is `text` lowered. */
static int text_words(Tokens *found, PyObject *names, const char *text, const char *low, Py_ssize_t size) {
    int capitals = 0, quotes = 0, paths = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        char c = text[i];
        capitals |= is_upper((unsigned char)c);
        quotes |= c == '\'' || c == '"';
        paths |= c == '/' || c == '.';
    }
    if (capitals && capitalised_add(names, text, low, size) < 0) {
        return -1;
    }
    if (quotes && quoted_add(names, low, size) < 0) {
        return -1;
    }
    if (!paths) { /* each [a-z0-9] run a word; the digits of a word that holds any, names */
        Py_ssize_t at = 0, start;
        while ((start = next_run(low, size, &at, is_lower_alnum)) >= 0) {
            if (token_add(found, low + start, at - start) < 0 || digits_add(names, low + start, at - start) < 0) {
                return -1;
            }
        }
        return 0;
    }
    Py_ssize_t at = 0, start;
    while ((start = next_run(low, size, &at, is_chunk)) >= 0) { /* each chunk between whitespace */
        Py_ssize_t first = start, end = at; /* the chunk stripped of `_AROUND` */
        while (first < end && is_around((unsigned char)low[first])) {
            first++;
        }
        while (end > first && is_around((unsigned char)low[end - 1])) {
            end--;
        }
        const char *name = low + first;
        Py_ssize_t size_of_name = end - first, undotted = size_of_name;
        while (undotted > 0 && name[undotted - 1] == '.') {
            undotted--;
        }
        int slash = memchr(name, '/', (size_t)size_of_name) != NULL;
        if (slash || memchr(name, '.', (size_t)undotted) != NULL) { /* a path, a file, a dotted name: one word */
            if (token_add(found, name, size_of_name) < 0) {
                return -1;
            }
            if (slash || has_extension(name, size_of_name)) {
                if (name_add(names, name, size_of_name) < 0) {
                    return -1;
                }
                continue;
            }
        } else if (runs_add(found, low + start, at - start) < 0) {
            return -1;
        }
        if (digits_add(names, name, size_of_name) < 0) {
            return -1;
        }
    }
    return 0;
}

/* `sketch._is_block`: three lines or more (two newlines before its trailing whitespace). */
static int is_block(const char *text, Py_ssize_t size) {
    Py_ssize_t end = size;
    while (end > 0 && is_space((unsigned char)text[end - 1])) {
        end--;
    }
    int lines = 0;
    for (Py_ssize_t i = 0; i < end && lines < 2; i++) {
        lines += text[i] == '\n';
    }
    return lines >= 2;
}

/* 1 if `sketch._sketch_py` reads `item` as this kernel can: an ASCII string, a scalar, a list of objects. */
static int readable(PyObject *item) {
    if (PyUnicode_CheckExact(item)) {
        return PyUnicode_IS_ASCII(item);
    }
    if (PyList_CheckExact(item)) {
        Py_ssize_t count = PyList_GET_SIZE(item);
        for (Py_ssize_t i = 0; i < count; i++) {
            if (!PyDict_CheckExact(PyList_GET_ITEM(item, i))) {
                return 0;
            }
        }
        return count > 0;
    }
    return PyLong_CheckExact(item) || PyFloat_CheckExact(item) || PyBool_Check(item) || item == Py_None;
}

/* The `digits` lowest hex digits of `value`, lowercase, as "%0*x" writes them. */
static void hex_of(uint64_t value, char *out, int digits) {
    for (int i = digits - 1; i >= 0; i--, value >>= 4) {
        out[i] = "0123456789abcdef"[value & 0xF];
    }
}

/* The tag of `key` \0 [\1] `value`: "%08x" of XXH3-64's low 32 bits. */
static PyObject *tag_of(const char *key, Py_ssize_t key_size, int text, const char *value, Py_ssize_t size, char *scratch) {
    Py_ssize_t at = 0;
    memcpy(scratch, key, (size_t)key_size);
    at = key_size;
    scratch[at++] = '\0';
    if (text) {
        scratch[at++] = '\x01';
    }
    memcpy(scratch + at, value, (size_t)size);
    char hex[8];
    hex_of(XXH3_64bits(scratch, (size_t)(at + size)), hex, 8);
    return PyUnicode_FromStringAndSize(hex, 8);
}

static int compare_tokens(const void *a, const void *b) {
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* Sorts `tokens` and drops repeats; the count left. */
static Py_ssize_t sort_unique(uint16_t *tokens, Py_ssize_t count) {
    qsort(tokens, (size_t)count, sizeof(uint16_t), compare_tokens);
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (kept == 0 || tokens[kept - 1] != tokens[i]) {
            tokens[kept++] = tokens[i];
        }
    }
    return kept;
}

/* The sketch as `_sketch_py` returns it: ((tag, (token, ...)), ...), the tokens at most `largest`. */
static PyObject *sketch_of(PyObject *tags, Tokens *found, Py_ssize_t *starts, Py_ssize_t groups, unsigned largest) {
    PyObject *sketch = PyTuple_New(groups);
    if (sketch == NULL) {
        return NULL;
    }
    for (Py_ssize_t g = 0; g < groups; g++) {
        Py_ssize_t kept = 0;
        for (Py_ssize_t i = starts[g]; i < starts[g + 1]; i++) {
            kept += found->tokens[i] <= largest;
        }
        PyObject *tokens = PyTuple_New(kept);
        if (tokens == NULL) {
            Py_DECREF(sketch);
            return NULL;
        }
        for (Py_ssize_t i = starts[g], at = 0; i < starts[g + 1]; i++) {
            if (found->tokens[i] > largest) {
                continue;
            }
            char hex[4];
            hex_of(found->tokens[i], hex, 4);
            PyObject *token = PyUnicode_FromStringAndSize(hex, 4);
            if (token == NULL) {
                Py_DECREF(tokens);
                Py_DECREF(sketch);
                return NULL;
            }
            PyTuple_SET_ITEM(tokens, at++, token);
        }
        PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(tags, g), tokens);
        Py_DECREF(tokens);
        if (pair == NULL) {
            Py_DECREF(sketch);
            return NULL;
        }
        PyTuple_SET_ITEM(sketch, g, pair);
    }
    return sketch;
}

/* The words of one argument (its key's, then its value's) added to `found`, its tag appended to `tags`. */
static int argument(PyObject *key, PyObject *item, PyObject *names, PyObject *dump, Tokens *found, PyObject *tags,
                    char *low, char *scratch) {
    Py_ssize_t key_size = PyUnicode_GET_LENGTH(key);
    const char *key_text = (const char *)PyUnicode_1BYTE_DATA(key);
    for (Py_ssize_t i = 0; i < key_size; i++) { /* the key's words: low[:key_size] */
        low[i] = (char)Py_TOLOWER((unsigned char)key_text[i]);
    }
    PyObject *tag = NULL;
    if (PyUnicode_CheckExact(item)) {
        const char *text = (const char *)PyUnicode_1BYTE_DATA(item);
        Py_ssize_t size = PyUnicode_GET_LENGTH(item);
        tag = tag_of(key_text, key_size, 1, text, size, scratch);
        if (tag == NULL) {
            return -1;
        }
        if (!is_block(text, size)) { /* a script or a file's content has no words: data the call writes */
            Py_ssize_t first = 0, end = size; /* str.strip() */
            while (first < end && is_space((unsigned char)text[first])) {
                first++;
            }
            while (end > first && is_space((unsigned char)text[end - 1])) {
                end--;
            }
            int spaced = 0;
            for (Py_ssize_t i = first; i < end; i++) {
                low[key_size + i - first] = (char)Py_TOLOWER((unsigned char)text[i]);
                spaced |= is_space((unsigned char)text[i]);
            }
            const char *value = low + key_size;
            if (runs_add(found, low, key_size) < 0 ||
                (spaced && text_words(found, names, text + first, value, end - first) < 0) ||
                (!spaced && end > first && token_add(found, value, end - first) < 0)) {
                Py_DECREF(tag);
                return -1;
            }
        }
    } else {
        int records = PyList_CheckExact(item); /* a list of objects: data the call writes, no words */
        PyObject *dumped = PyObject_CallOneArg(dump, item);
        if (dumped == NULL) {
            return -1;
        }
        Py_ssize_t dumped_size = 0;
        const char *text = PyUnicode_Check(dumped) ? PyUnicode_AsUTF8AndSize(dumped, &dumped_size) : NULL;
        char *room = text == NULL ? NULL : PyMem_Malloc((size_t)(key_size + dumped_size + 2));
        if (room == NULL) {
            if (text != NULL) {
                PyErr_NoMemory();
            } else if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "dump returned no str");
            }
            Py_DECREF(dumped);
            return -1;
        }
        tag = tag_of(key_text, key_size, 0, text, dumped_size, room);
        PyMem_Free(room);
        if (tag == NULL || (!records && (runs_add(found, low, key_size) < 0 || token_add(found, text, dumped_size) < 0))) {
            Py_XDECREF(tag);
            Py_DECREF(dumped);
            return -1;
        }
        Py_DECREF(dumped);
    }
    int failed = PyList_Append(tags, tag);
    Py_DECREF(tag);
    return failed;
}

PyDoc_STRVAR(sketch_doc,
             "sketch(value, names, dump, max_args, max_tokens, /)\n--\n\n"
             "`sketch._sketch_py` of an arguments object `value`, adding what its free text names to `names`; "
             "`dump` is `normalize.sorted_dump`. None (and `names` untouched) for a value the kernel does not "
             "read: the twin reads it.");

static PyObject *sketch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "sketch takes 5 arguments");
        return NULL;
    }
    PyObject *value = args[0], *names = args[1], *dump = args[2];
    Py_ssize_t max_args = PyLong_AsSsize_t(args[3]), max_tokens = PyLong_AsSsize_t(args[4]);
    if ((max_args == -1 || max_tokens == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (!PySet_Check(names) || max_tokens < 1) {
        PyErr_SetString(PyExc_TypeError, "names must be a set and max_tokens positive");
        return NULL;
    }
    if (!PyDict_CheckExact(value) || PyDict_GET_SIZE(value) == 0 || PyDict_GET_SIZE(value) >= max_args) {
        Py_RETURN_NONE;
    }
    /* Everything read first: the twin gets what the kernel cannot read before anything is added to `names`. */
    Py_ssize_t position = 0, longest = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &position, &key, &item)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_IS_ASCII(key) || !readable(item)) {
            Py_RETURN_NONE;
        }
        Py_ssize_t size = PyUnicode_GET_LENGTH(key) + (PyUnicode_CheckExact(item) ? PyUnicode_GET_LENGTH(item) : 0);
        longest = size > longest ? size : longest;
    }
    PyObject *items = PyDict_Items(value), *tags = PyList_New(0), *result = NULL;
    char *low = PyMem_Malloc((size_t)longest + 2), *scratch = PyMem_Malloc((size_t)longest + 2);
    Py_ssize_t groups = PyDict_GET_SIZE(value);
    Py_ssize_t *starts = PyMem_Malloc((size_t)(groups + 1) * sizeof(Py_ssize_t));
    Tokens found = {NULL, 0, 0};
    uint16_t *every = NULL;
    if (items == NULL || tags == NULL || low == NULL || scratch == NULL || starts == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        goto done;
    }
    if (PyList_Sort(items) < 0) { /* by key: keys differ, so no value is compared */
        goto done;
    }
    for (Py_ssize_t g = 0; g < groups; g++) {
        PyObject *pair = PyList_GET_ITEM(items, g);
        Py_ssize_t start = found.count;
        if (argument(PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), names, dump, &found, tags, low, scratch) < 0) {
            goto done;
        }
        starts[g] = start;
        found.count = start + sort_unique(found.tokens + start, found.count - start);
    }
    starts[groups] = found.count;
    unsigned largest = 0xFFFF; /* the tokens kept: the `max_tokens` smallest of the call */
    if (found.count > max_tokens) {
        every = PyMem_Malloc((size_t)found.count * sizeof(uint16_t));
        if (every == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        memcpy(every, found.tokens, (size_t)found.count * sizeof(uint16_t));
        Py_ssize_t distinct = sort_unique(every, found.count);
        if (distinct > max_tokens) {
            largest = every[max_tokens - 1];
        }
    }
    result = sketch_of(tags, &found, starts, groups, largest);
done:
    Py_XDECREF(items);
    Py_XDECREF(tags);
    PyMem_Free(low);
    PyMem_Free(scratch);
    PyMem_Free(starts);
    PyMem_Free(found.tokens);
    PyMem_Free(every);
    return result;
}

static PyMethodDef methods[] = {
    {"sketch", (PyCFunction)(void (*)(void))sketch, METH_FASTCALL, sketch_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_sketching",
    .m_doc = "A call's argument sketch, in C (see detectors/support/sketch.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__sketching(void) { return PyModule_Create(&module); }
