/* The shingle kernel in C: `shingles.hashes` and `shingles.tops`, the same results as their Python twins in
 * detectors/support/shingles.py (`_hashes_py`, `_tops_py`), without a Python object per word triple.
 *
 * Built when the C compiler and xxHash's header (Debian: libxxhash-dev) are there (setup.py's optional
 * extension); where it is not built, shingles.py runs its Python twins. tests/detectors/support/test_shingles.py
 * checks the two give the same answers on generated texts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* bytes.split()'s whitespace (ASCII): a word is a run of anything else. */
static int is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

typedef struct {
    const char *start;
    Py_ssize_t size;
} Word;

static int add_hash(PyObject *found, const char *buffer, Py_ssize_t size) {
    PyObject *value = PyLong_FromUnsignedLongLong((unsigned long long)XXH3_64bits(buffer, (size_t)size));
    if (value == NULL) {
        return -1;
    }
    int failed = PySet_Add(found, value);
    Py_DECREF(value);
    return failed;
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

/* 1 if the line's words mostly come from `echo` (a share of at least `share` of its distinct words are in it),
 * 0 if not, -1 on error: Python's `not echo.isdisjoint(words) and len(echo & set(words)) >= share * len(set(words))`. */
static int echoes(PyObject *echo, const Word *words, Py_ssize_t count, double share) {
    PyObject *distinct = PySet_New(NULL);
    if (distinct == NULL) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *word = PyBytes_FromStringAndSize(words[i].start, words[i].size);
        if (word == NULL || PySet_Add(distinct, word) < 0) {
            Py_XDECREF(word);
            Py_DECREF(distinct);
            return -1;
        }
        Py_DECREF(word);
    }
    Py_ssize_t shared = 0, position = 0;
    Py_hash_t hash;
    PyObject *word;
    while (_PySet_NextEntry(distinct, &position, &word, &hash)) {
        int in = PySet_Contains(echo, word);
        if (in < 0) {
            Py_DECREF(distinct);
            return -1;
        }
        shared += in;
    }
    double size = (double)PySet_GET_SIZE(distinct);
    Py_DECREF(distinct);
    return shared > 0 && (double)shared >= share * size;
}

PyDoc_STRVAR(hashes_doc,
             "hashes(text, echo, budget, width, share)\n--\n\n"
             "XXH3-64 hashes of `text`'s `width`-word shingles, line by line (a line of `width` words or fewer is "
             "one shingle), leaving out a line whose distinct words are at least `share` in `echo`, reading at "
             "most `budget` words.");

static PyObject *hashes(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer text;
    PyObject *echo;
    Py_ssize_t budget, width;
    double share;
    if (!PyArg_ParseTuple(args, "y*Onnd", &text, &echo, &budget, &width, &share)) {
        return NULL;
    }
    PyObject *found = NULL;
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
    if (words == NULL || buffer == NULL || found == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        Py_CLEAR(found);
        goto done;
    }
    int echoing = PySet_GET_SIZE(echo) > 0;
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
            int said = echoes(echo, words, count, share);
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
            if (add_hash(found, buffer, join(words + i, span, buffer)) < 0) {
                Py_CLEAR(found);
                goto done;
            }
        }
        if (budget <= 0) {
            break;
        }
    }
done:
    PyMem_Free(words);
    PyMem_Free(buffer);
    PyBuffer_Release(&text);
    return found;
}

static int by_value(const void *a, const void *b) {
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
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
    Py_ssize_t size = PySet_GET_SIZE(hashes);
    uint16_t *values = PyMem_Malloc(sizeof(uint16_t) * (size_t)(size + 1));
    if (values == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t count = 0, position = 0;
    Py_hash_t hash;
    PyObject *item;
    while (_PySet_NextEntry(hashes, &position, &item, &hash)) {
        unsigned long long value = PyLong_AsUnsignedLongLong(item);
        if (value == (unsigned long long)-1 && PyErr_Occurred()) {
            PyMem_Free(values);
            return NULL;
        }
        values[count++] = (uint16_t)(value >> 48);
    }
    qsort(values, (size_t)count, sizeof(uint16_t), by_value);
    Py_ssize_t kept = count < keep ? count : keep;
    PyObject *out = PyList_New(kept);
    for (Py_ssize_t i = 0; out != NULL && i < kept; i++) {
        PyObject *value = PyLong_FromLong(values[i]);
        if (value == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, value);
    }
    PyMem_Free(values);
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
