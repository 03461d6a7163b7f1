/* A JSON tool result's units, in C: `shingles._Units(volatile).walk(value, "")` without a bytecode loop per
 * value. Each scalar becomes a "key value" unit (a volatile key's value left out) until `room` characters are
 * read; `shingles` hashes their words (`_shingling.c`). Built by setup.py's optional extension where a C
 * compiler is; tests/detectors/support/test__units.py compares it with `_Units` on generated values.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The Python objects met are those `orjson` makes; formatting is `format(x, "")`, as the twin's f-strings
 * do, and JSON text inside a string is parsed by the twin's own `parse_json`. */
typedef struct {
    PyObject *out, *volatile_keys, *parse, *lower, *empty;
    Py_ssize_t room, max_depth, max_parsed;
} Walk;

/* format(value, ""): the value itself for a str, str() for an int or a float (the same text), else format. */
static PyObject *shown_of(PyObject *value, PyObject *empty) {
    if (PyUnicode_CheckExact(value)) {
        return Py_NewRef(value);
    }
    if (PyLong_CheckExact(value) || PyFloat_CheckExact(value)) {
        return PyObject_Str(value);
    }
    return PyObject_Format(value, empty);
}

/* `key` + " " + format(value, ""), its first `room` characters appended; `room` less its whole length. The
 * unit is written into one new str, not joined. */
static int add_unit(Walk *w, PyObject *key, PyObject *value) {
    PyObject *shown = shown_of(value, w->empty);
    if (shown == NULL) {
        return -1;
    }
    Py_ssize_t left = PyUnicode_GET_LENGTH(key), right = PyUnicode_GET_LENGTH(shown);
    Py_ssize_t length = left + 1 + right;
    Py_ssize_t kept = length < w->room ? length : w->room;
    Py_UCS4 widest = PyUnicode_MAX_CHAR_VALUE(key) > PyUnicode_MAX_CHAR_VALUE(shown) ? PyUnicode_MAX_CHAR_VALUE(key)
                                                                                      : PyUnicode_MAX_CHAR_VALUE(shown);
    PyObject *unit = PyUnicode_New(length, widest);
    int failed = unit == NULL;
    if (!failed) {
        PyUnicode_WRITE(PyUnicode_KIND(unit), PyUnicode_DATA(unit), left, ' ');
        failed = PyUnicode_CopyCharacters(unit, 0, key, 0, left) < 0 ||
                 PyUnicode_CopyCharacters(unit, left + 1, shown, 0, right) < 0;
    }
    Py_DECREF(shown);
    if (!failed && kept < length) {
        Py_SETREF(unit, PyUnicode_Substring(unit, 0, kept));
        failed = unit == NULL;
    }
    failed = failed || PyList_Append(w->out, unit) < 0;
    Py_XDECREF(unit);
    w->room -= length;
    return failed ? -1 : 0;
}

/* name.lower(), without a new str for an ASCII name with no capital (most JSON keys). */
static PyObject *lowered_of(PyObject *name, PyObject *lower) {
    if (PyUnicode_IS_ASCII(name)) {
        const Py_UCS1 *chars = PyUnicode_1BYTE_DATA(name);
        Py_ssize_t size = PyUnicode_GET_LENGTH(name), i = 0;
        while (i < size && !(chars[i] >= 'A' && chars[i] <= 'Z')) {
            i++;
        }
        if (i == size) {
            return Py_NewRef(name);
        }
    }
    return PyObject_CallMethodNoArgs(name, lower);
}

static int opens_json(PyObject *text) { /* text[:1] in ("{", "[") */
    if (PyUnicode_GET_LENGTH(text) == 0) {
        return 0;
    }
    Py_UCS4 first = PyUnicode_READ_CHAR(text, 0);
    return first == '{' || first == '[';
}

static int walk(Walk *w, PyObject *value, PyObject *key, Py_ssize_t depth);

static int walk_dict(Walk *w, PyObject *value, Py_ssize_t depth) {
    int inside = depth < w->max_depth;
    Py_ssize_t position = 0;
    PyObject *inner, *item;
    while (PyDict_Next(value, &position, &inner, &item)) {
        PyObject *name = PyUnicode_CheckExact(inner) ? Py_NewRef(inner) : PyObject_Str(inner);
        PyObject *lowered = name == NULL ? NULL : lowered_of(name, w->lower);
        int skip = lowered == NULL ? -1 : PySequence_Contains(w->volatile_keys, lowered);
        Py_XDECREF(lowered);
        int failed = skip < 0;
        if (!failed && !skip) {
            int scalar = (PyUnicode_CheckExact(item) && !opens_json(item)) || PyLong_CheckExact(item) ||
                         PyFloat_CheckExact(item);
            if (inside && scalar) {
                failed = w->room > 0 && add_unit(w, name, item) < 0;
            } else {
                failed = walk(w, item, name, depth + 1) < 0;
            }
        }
        Py_XDECREF(name);
        if (failed) {
            return -1;
        }
    }
    return 0;
}

static int walk(Walk *w, PyObject *value, PyObject *key, Py_ssize_t depth) {
    if (depth > w->max_depth || w->room <= 0) {
        return 0;
    }
    if (Py_EnterRecursiveCall(" walking a tool result")) {
        return -1;
    }
    int failed = 0;
    if (PyDict_Check(value)) {
        failed = walk_dict(w, value, depth);
    } else if (PyList_Check(value)) {
        for (Py_ssize_t i = 0; !failed && i < PyList_GET_SIZE(value); i++) {
            PyObject *item = Py_NewRef(PyList_GET_ITEM(value, i));
            failed = walk(w, item, key, depth + 1) < 0;
            Py_DECREF(item);
        }
    } else if (PyUnicode_Check(value) && opens_json(value) && PyUnicode_GET_LENGTH(value) <= w->max_parsed) {
        PyObject *inner = PyObject_CallOneArg(w->parse, value);
        if (inner == NULL) {
            failed = 1;
        } else if (PyDict_Check(inner) || PyList_Check(inner)) {
            failed = walk(w, inner, key, depth + 1) < 0;
        } else {
            failed = add_unit(w, key, value) < 0;
        }
        Py_XDECREF(inner);
    } else if (value != Py_None) {
        failed = add_unit(w, key, value) < 0;
    }
    Py_LeaveRecursiveCall();
    return failed ? -1 : 0;
}

PyDoc_STRVAR(units_doc,
             "units(value, volatile, room, max_depth, max_parsed, parse_json)\n--\n\n"
             "The units of a JSON value, as shingles._Units(volatile).walk(value, '') collects them.");

static PyObject *units(PyObject *Py_UNUSED(module), PyObject *args) {
    Walk w = {NULL, NULL, NULL, NULL, NULL, 0, 0, 0};
    PyObject *value;
    if (!PyArg_ParseTuple(args, "OOnnnO", &value, &w.volatile_keys, &w.room, &w.max_depth, &w.max_parsed, &w.parse)) {
        return NULL;
    }
    w.out = PyList_New(0);
    w.lower = PyUnicode_InternFromString("lower");
    w.empty = PyUnicode_New(0, 0);
    int failed = w.out == NULL || w.lower == NULL || w.empty == NULL;
    if (!failed) {
        failed = walk(&w, value, w.empty, 0) < 0;
    }
    Py_XDECREF(w.lower);
    Py_XDECREF(w.empty);
    if (failed) {
        Py_CLEAR(w.out);
    }
    return w.out;
}

static PyMethodDef methods[] = {
    {"units", units, METH_VARARGS, units_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_units",
    .m_doc = "A JSON tool result's units, in C (see detectors/support/shingles.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__units(void) { return PyModule_Create(&module); }
