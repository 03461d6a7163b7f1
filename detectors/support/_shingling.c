/* The shingle kernel in C: `hashes` and `tops`, the same results as their Python twins in
 * detectors/support/shingles.py (`hashes_py`, `tops_py`), without a Python object per word triple.
 *
 * Built when the C compiler and xxHash's header (Debian: libxxhash-dev) are there (setup.py's optional
 * extension); where it is not built, shingles.py runs its Python twins. tests/detectors/support/test__shingling.py
 * checks the two give the same answers on generated texts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* bytes.split()'s whitespace (ASCII): a word is a run of anything else. */
static int is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

typedef struct {
    const char *start; /* NULL: an empty slot of a table */
    Py_ssize_t size;
} Word;

static int is_word(const Word *a, const Word *b) {
    return a->size == b->size && memcmp(a->start, b->start, (size_t)a->size) == 0;
}

/* A set of words, open-addressed by XXH3-64: the echo's words, or one line's (to count them once each). */
typedef struct {
    Word *slots;
    size_t mask;
} Words;

static int words_new(Words *table, Py_ssize_t most) {
    size_t size = 8;
    while (size < (size_t)most * 2) {
        size <<= 1;
    }
    table->mask = size - 1;
    table->slots = PyMem_Calloc(size, sizeof(Word));
    if (table->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The slot holding `word`, else the empty slot where it would go. */
static Word *words_slot(const Words *table, const Word *word) {
    size_t at = (size_t)XXH3_64bits(word->start, (size_t)word->size) & table->mask;
    while (table->slots[at].start != NULL && !is_word(&table->slots[at], word)) {
        at = (at + 1) & table->mask;
    }
    return &table->slots[at];
}

/* 1 if `word` was added, 0 if the table held it already. */
static int words_add(Words *table, const Word *word) {
    Word *slot = words_slot(table, word);
    if (slot->start != NULL) {
        return 0;
    }
    *slot = *word;
    return 1;
}

static int words_have(const Words *table, const Word *word) { return words_slot(table, word)->start != NULL; }

/* The bytes of `echo` (a set) as a table; anything else in it equals no word of a text. */
static int echo_table(Words *table, PyObject *echo) {
    if (words_new(table, PySet_GET_SIZE(echo)) < 0) {
        return -1;
    }
    Py_ssize_t position = 0;
    Py_hash_t hash;
    PyObject *item;
    while (_PySet_NextEntry(echo, &position, &item, &hash)) {
        if (PyBytes_Check(item)) {
            Word word = {PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item)};
            words_add(table, &word);
        }
    }
    return 0;
}

/* 1 if the line's words mostly come from `echo` (a share of at least `share` of its distinct words are in it),
 * 0 if not, -1 on error: Python's `not echo.isdisjoint(words) and len(echo & set(words)) >= share * len(set(words))`.
 * Most lines hold no word of the echo, told without counting their distinct words. */
static int echoes(const Words *echo, const Word *words, Py_ssize_t count, double share) {
    Py_ssize_t i = 0;
    while (i < count && !words_have(echo, &words[i])) {
        i++;
    }
    if (i == count) {
        return 0;
    }
    Words line;
    if (words_new(&line, count) < 0) {
        return -1;
    }
    Py_ssize_t shared = 0, distinct = 0;
    for (i = 0; i < count; i++) {
        if (words_add(&line, &words[i])) {
            distinct++;
            shared += words_have(echo, &words[i]);
        }
    }
    PyMem_Free(line.slots);
    return (double)shared >= share * (double)distinct;
}

static int add_hash(PyObject *found, uint64_t hash) {
    PyObject *value = PyLong_FromUnsignedLongLong((unsigned long long)hash);
    if (value == NULL) {
        return -1;
    }
    int failed = PySet_Add(found, value);
    Py_DECREF(value);
    return failed;
}

/* The `room` smallest distinct hashes so far, sorted: a hash no smaller than all of them once it is full
 * (most, on a long text) is passed over with one comparison. */
typedef struct {
    uint64_t *values;
    Py_ssize_t count, room;
} Smallest;

static void smallest_add(Smallest *kept, uint64_t hash) {
    Py_ssize_t count = kept->count;
    if (count == kept->room && hash >= kept->values[count - 1]) {
        return;
    }
    Py_ssize_t low = 0, high = count; /* the first place whose value is not below `hash` */
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (kept->values[middle] < hash) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    if (low < count && kept->values[low] == hash) {
        return;
    }
    Py_ssize_t last = count < kept->room ? count : count - 1; /* the largest gives way when full */
    memmove(kept->values + low + 1, kept->values + low, sizeof(uint64_t) * (size_t)(last - low));
    kept->values[low] = hash;
    if (count < kept->room) {
        kept->count++;
    }
}

/* `count` words from `words`, joined by one space into `buffer`: its length. */
static Py_ssize_t join(const Word *words, Py_ssize_t count, char *buffer) {
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i) {
            buffer[at++] = ' ';
        }
        memcpy(buffer + at, words[i].start, (size_t)words[i].size);
        at += words[i].size;
    }
    return at;
}

PyDoc_STRVAR(hashes_doc,
             "hashes(text, echo, budget, width, share, keep)\n--\n\n"
             "XXH3-64 hashes of `text`'s `width`-word shingles, line by line (a line of `width` words or fewer is "
             "one shingle), leaving out a line whose distinct words are at least `share` in `echo`, reading at "
             "most `budget` words; with `keep` over 0, only the `keep` smallest of them.");

static PyObject *hashes(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer text;
    PyObject *echo;
    Py_ssize_t budget, width, keep;
    double share;
    if (!PyArg_ParseTuple(args, "y*Onndn", &text, &echo, &budget, &width, &share, &keep)) {
        return NULL;
    }
    PyObject *found = NULL;
    Smallest kept = {NULL, 0, keep};
    Words table = {NULL, 0};
    Word *words = NULL;
    char *buffer = NULL;
    if (!PyAnySet_Check(echo) || budget < 1 || width < 1) {
        PyErr_SetString(PyExc_ValueError, "echo must be a set, budget and width at least 1");
        goto done;
    }
    const char *bytes = text.buf;
    Py_ssize_t size = text.len;
    /* Every word and every join fits in the text's own length (plus one, for an empty text). */
    words = PyMem_Malloc(sizeof(Word) * (size_t)(size / 2 + 1));
    buffer = PyMem_Malloc((size_t)size + 1);
    found = PySet_New(NULL);
    if (keep > 0) {
        kept.values = PyMem_Malloc(sizeof(uint64_t) * (size_t)keep);
    }
    if (words == NULL || buffer == NULL || found == NULL || (keep > 0 && kept.values == NULL)) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        Py_CLEAR(found);
        goto done;
    }
    int echoing = PySet_GET_SIZE(echo) > 0;
    if (echoing && echo_table(&table, echo) < 0) {
        Py_CLEAR(found);
        goto done;
    }
    Py_ssize_t at = 0;
    while (at <= size) {
        const char *end = memchr(bytes + at, '\n', (size_t)(size - at));
        Py_ssize_t stop = end ? end - bytes : size;
        Py_ssize_t count = 0;
        for (Py_ssize_t i = at; i < stop;) {
            if (is_space((unsigned char)bytes[i])) {
                i++;
                continue;
            }
            Py_ssize_t first = i;
            while (i < stop && !is_space((unsigned char)bytes[i])) {
                i++;
            }
            words[count].start = bytes + first;
            words[count].size = i - first;
            count++;
        }
        at = stop + 1;
        if (count == 0) {
            continue;
        }
        if (echoing) {
            int said = echoes(&table, words, count, share);
            if (said < 0) {
                Py_CLEAR(found);
                goto done;
            }
            if (said) {
                continue;
            }
        }
        if (count > budget) {
            count = budget;
        }
        budget -= count;
        Py_ssize_t windows = count <= width ? 1 : count - width + 1;
        Py_ssize_t span = count <= width ? count : width;
        for (Py_ssize_t i = 0; i < windows; i++) {
            uint64_t hash = XXH3_64bits(buffer, (size_t)join(words + i, span, buffer));
            if (keep > 0) {
                smallest_add(&kept, hash);
            } else if (add_hash(found, hash) < 0) {
                Py_CLEAR(found);
                goto done;
            }
        }
        if (budget <= 0) {
            break;
        }
    }
    for (Py_ssize_t i = 0; i < kept.count; i++) {
        if (add_hash(found, kept.values[i]) < 0) {
            Py_CLEAR(found);
            goto done;
        }
    }
done:
    PyMem_Free(kept.values);
    PyMem_Free(table.slots);
    PyMem_Free(words);
    PyMem_Free(buffer);
    PyBuffer_Release(&text);
    return found;
}

PyDoc_STRVAR(tops_doc,
             "tops(hashes, keep)\n--\n\n"
             "The top 16 bits of each of `hashes` (64-bit), sorted, the first `keep` of them.");

static PyObject *tops(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *hashes;
    Py_ssize_t keep;
    if (!PyArg_ParseTuple(args, "On", &hashes, &keep)) {
        return NULL;
    }
    if (!PyAnySet_Check(hashes) || keep < 0) {
        PyErr_SetString(PyExc_ValueError, "hashes must be a set, keep at least 0");
        return NULL;
    }
    /* The `keep` smallest so far, sorted: most values are larger than all of them once it is full, and are
     * passed over with one comparison. */
    Py_ssize_t room = keep < PySet_GET_SIZE(hashes) ? keep : PySet_GET_SIZE(hashes);
    uint16_t *kept = PyMem_Malloc(sizeof(uint16_t) * (size_t)(room + 1));
    if (kept == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t count = 0, position = 0;
    Py_hash_t hash;
    PyObject *item;
    while (room > 0 && _PySet_NextEntry(hashes, &position, &item, &hash)) {
        unsigned long long value = PyLong_AsUnsignedLongLong(item);
        if (value == (unsigned long long)-1 && PyErr_Occurred()) {
            PyMem_Free(kept);
            return NULL;
        }
        uint16_t top = (uint16_t)(value >> 48);
        if (count == room && top >= kept[count - 1]) {
            continue;
        }
        Py_ssize_t at = count < room ? count++ : count - 1; /* the largest gives way when full */
        while (at > 0 && kept[at - 1] > top) {
            kept[at] = kept[at - 1];
            at--;
        }
        kept[at] = top;
    }
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        PyObject *value = PyLong_FromLong(kept[i]);
        if (value == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, value);
    }
    PyMem_Free(kept);
    return out;
}

static PyMethodDef methods[] = {
    {"hashes", hashes, METH_VARARGS, hashes_doc},
    {"tops", tops, METH_VARARGS, tops_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_shingling",
    .m_doc = "The shingle kernel in C (see detectors/support/shingles.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__shingling(void) { return PyModule_Create(&module); }
