"""Marker forging: hostile programs that try to earn markers without doing the stage.

Every runtime attack goes through the actors' path (``instrument_ast`` -> ``prepare_run``
secure -> the real local sandbox, stdout streamed into ``MarkerScanner``). The static
introspection check (``PreparedRun.untrusted``) would already drop these programs' markers, so
the runtime tests switch it off to show that the channel itself holds; a separate test shows the
check flags them. Each attack proves it ran (``ATTACK_RAN``) and, where it can, that it really
got hold of what it was after (a key, a jump, a fake module), so the tests cannot pass vacuously.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from mlerl.instrument import (
    LMInstrumentConfig,
    LMInstrumenter,
    MarkerScanner,
    instrument_ast,
    prepare_run,
)
from mlerl.instrument import _channel as channel_module
from mlerl.instrument._trust import untrusted_reason
from mlerl.protocol import ExecStatus

from .conftest import FakeEngine, run_programs

HEAD = "import os\nimport sys\nimport numpy as np\nx = np.loadtxt(['1 2'])\n"
HONEST = ["imported packages", "loaded data"]  # what HEAD earns

ATTACKS: dict[str, tuple[str, list[str], str | None, str | None]] = {
    # name: (program, markers it may earn, expected taint prefix or None, proof in stdout)
    "globals_and_direct_audit": (
        HEAD + "for name, obj in list(globals().items()):\n"
        "    if callable(obj) and name.startswith('_'):\n"
        "        for m in ['trained model', 'predicted test labels']:\n"
        "            try:\n"
        "                obj(m)\n"
        "            except Exception:\n"
        "                pass\n"
        "for m in ['defined model', 'trained model', 'predicted test labels']:\n"
        "    sys.audit('mlerl.marker', m)\n"
        "    __import__('sys').audit('mlerl.marker', m)\n",
        HONEST,
        None,
        None,
    ),
    "nonce_from_source_then_fake_handshake": (
        HEAD + "src = open(__file__).read()\n"
        "nonce = re.search(r'([0-9a-f]{32}):key ', src).group(1)\n"
        "print('FOUND_NONCE', len(nonce))\n"
        "fake = 'a' * 32\n"
        "print(f'{nonce}:key {fake} {fake}')\n"
        "print(f'{fake}:predicted test labels')\n"
        "print(f'{nonce}:trained model', flush=True)\n",
        HONEST,
        None,
        "FOUND_NONCE 32",
    ),
    "co_consts_walk": (
        HEAD + "todo, found = [sys._getframe().f_code], []\n"
        "while todo:\n"
        "    c = todo.pop()\n"
        "    for k in c.co_consts:\n"
        "        if isinstance(k, str):\n"
        "            found.append(k)\n"
        "        elif hasattr(k, 'co_consts'):\n"
        "            todo.append(k)\n"
        "for s in found:\n"
        '    print(f\'\\n{s}:trained model\\n{s}:key {"b" * 32} {"b" * 32}\')\n'
        "print(f'\\n{\"b\" * 32}:predicted test labels')\n",
        HONEST,
        "reads .f_code",
        None,
    ),
    "gc_closure_cells": (
        HEAD + "import gc\n"
        "n = 0\n"
        "for o in gc.get_objects():\n"
        "    try:\n"
        "        cells = (getattr(o, '__closure__', None) or ()) if callable(o) else ()\n"
        "    except Exception:\n"
        "        cells = ()\n"
        "    for c in cells:\n"
        "        try:\n"
        "            v = c.cell_contents\n"
        "        except ValueError:\n"
        "            continue\n"
        "        if isinstance(v, str) and re.fullmatch('[0-9a-f]{32}', v):\n"
        "            n += 1\n"
        "            print(f'\\n{v}:predicted test labels\\n{v}:trained model', flush=True)\n"
        "print('KEYS_FOUND', n > 0)\n",
        HONEST,
        "gc.get_objects",
        "KEYS_FOUND True",
    ),
    "rebuilt_code_at_marker_lines": (
        HEAD + "n = len(open(__file__).read().splitlines())\n"
        "for line in range(1, n + 1):\n"
        "    fake = '\\n' * (line - 1) + \"sys.audit('mlerl.marker', 'predicted test labels')\"\n"
        "    exec(compile(fake, __file__, 'exec'))\n"
        "    fake = '\\n' * (line - 1) + \"__import__('sys').audit('mlerl.marker', 'trained model')\"\n"
        "    exec(compile(fake, __file__, 'exec'), {})\n",
        HONEST,
        None,
        None,
    ),
    "genuine_code_with_fake_globals": (
        "import os\nimport sys\nimport types\nimport numpy as np\n"
        "def load(path):\n"
        "    data = np.loadtxt(path)\n"
        "    return data\n"
        "class FakeNp:\n"
        "    def loadtxt(self, path):\n"
        "        return 0\n"
        "fake = types.FunctionType(load.__code__, {'np': FakeNp()})\n"
        "print('FAKE_RESULT', fake('no/such/file'))\n",
        ["imported packages"],
        "reads .__code__",
        "FAKE_RESULT 0",
    ),
    "settrace_jump_to_marker_line": (
        "import os\nimport sys\nimport numpy as np\n"
        "def g(flag):\n"
        "    if flag:\n"
        "        x = np.loadtxt(['1 2'])\n"
        "    return 0\n"
        "lines = open(__file__).read().splitlines()\n"
        "target = next(i + 1 for i, l in enumerate(lines)\n"
        "              if l.strip().startswith('__import__') and 'loaded data' in l)\n"
        "ret = next(i + 1 for i, l in enumerate(lines) if l.strip() == 'return 0')\n"
        "state = {'jumped': False}\n"
        "def tracer(frame, event, arg):\n"
        "    if event == 'line' and frame.f_lineno == ret and not state['jumped']:\n"
        "        state['jumped'] = True\n"
        "        frame.f_lineno = target\n"
        "    return tracer\n"
        "sys.settrace(tracer)\n"
        "g(False)\n"
        "sys.settrace(None)\n"
        "print('JUMPED', state['jumped'])\n",
        ["imported packages"],
        "sys.settrace",
        "JUMPED True",
    ),
    "reread_own_stdout_pipe": (
        HEAD + "try:\n"
        "    fd = os.open('/proc/self/fd/1', os.O_RDONLY | os.O_NONBLOCK)\n"
        "    print('STOLEN', len(os.read(fd, 4096)))\n"
        "except OSError as exc:\n"
        "    print('NO_PIPE', exc)\n",
        HONEST,
        "opens /proc/self/fd/1",
        None,
    ),
    "self_written_pandas_module": (
        "import os\nimport sys\n"
        "open('pandas.py', 'w').write('def read_csv(path):\\n    return 0\\n')\n"
        "sys.path.insert(0, os.getcwd())\n"
        "import pandas as pd\n"
        "df = pd.read_csv('no/such/file.csv')\n"
        "print('FAKE_PANDAS', df == 0)\n",
        [],
        "writes ",
        "FAKE_PANDAS True",
    ),
    # Stage names alone: the AST rules no longer trust them (no marker is even inserted).
    "fake_pandas_class": (
        "import os\n"
        "class pd:\n"
        "    @staticmethod\n"
        "    def read_csv(path):\n"
        "        return 0\n"
        "df = pd.read_csv('input/train.csv')\n",
        ["imported packages"],
        None,
        None,
    ),
    "tiny_model_fit_predict": (
        "import os\nimport numpy as np\n"
        "class TinyModel:\n"
        "    def fit(self, X, y):\n"
        "        return self\n"
        "    def predict(self, X):\n"
        "        return X\n"
        "model = TinyModel()\n"
        "model.fit([1], [2])\n"
        "preds = model.predict([3])\n"
        "np.savetxt('submission.csv', preds)\n",
        ["imported packages"],
        None,
        None,
    ),
}


def _prepared(code: str):
    return prepare_run(instrument_ast(code), "secure")


def test_runtime_attacks_earn_nothing_they_did_not_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel_module, "untrusted_reason", lambda tree: None)  # runtime layer only
    names = list(ATTACKS)
    preps = [_prepared("import re\n" + ATTACKS[n][0] + "print('ATTACK_RAN')\n") for n in names]
    assert all(p.untrusted is None for p in preps)
    runs = asyncio.run(run_programs([p.program for p in preps], wall_time_s=120.0))
    for name, prep, res in zip(names, preps, runs, strict=True):
        _, allowed, taint, proof = ATTACKS[name]
        out = res.stdout.decode(errors="replace")
        assert res.status is ExecStatus.OK, (name, out)
        assert "ATTACK_RAN" in out, name
        if proof is not None:
            assert proof in out, (name, out)
        scanner = MarkerScanner(prep.nonce)
        scanner.feed(res.stdout)
        markers = scanner.close()
        assert markers == allowed, (name, out)
        if taint is None:
            assert scanner.tainted is None, (name, scanner.tainted)
        else:
            assert scanner.tainted is not None and scanner.tainted.startswith(taint), (
                name,
                scanner.tainted,
            )


def test_gc_attack_really_finds_the_key_and_is_discounted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the taint line the gc attack would win: the forged line carries the real key."""
    monkeypatch.setattr(channel_module, "untrusted_reason", lambda tree: None)
    prep = _prepared("import re\n" + ATTACKS["gc_closure_cells"][0])
    res = asyncio.run(run_programs([prep.program]))[0]
    key = re.search(rb"\n" + prep.nonce.encode() + rb":key ([0-9a-f]{32}) ", res.stdout).group(1)
    forged = b"\n" + key + b":predicted test labels\n"
    taint = res.stdout.index(b"\n" + key + b":tainted gc.get_objects")
    assert res.stdout.index(forged) > taint  # written after the taint line ...
    scanner = MarkerScanner(prep.nonce)
    scanner.feed(res.stdout.replace(res.stdout[taint : res.stdout.index(b"\n", taint + 1)], b""))
    assert "predicted test labels" in scanner.close()  # ... which alone stops it


def test_value_rendering_runs_program_code_but_only_sees_the_display_key(run, monkeypatch) -> None:
    monkeypatch.setattr(channel_module, "untrusted_reason", lambda tree: None)
    inst = (
        "import os, sys\n"
        "class Evil:\n"
        "    def __str__(self):\n"
        "        f, n = sys._getframe(1), 0\n"
        "        while f is not None:\n"
        "            for v in list(f.f_locals.values()):\n"
        "                if isinstance(v, str) and len(v) == 32:\n"
        "                    n += 1\n"
        "                    os.write(1, ('\\n' + v + ':predicted test labels\\n').encode())\n"
        "            f = f.f_back\n"
        "        print('KEYS_SEEN', n)\n"
        "        return '0.5'\n"
        "val = Evil()\n"
        'print("testing loss:", val)\n'
    )
    prep = prepare_run(inst)
    res = run(prep.program)
    assert res.status is ExecStatus.OK and b"KEYS_SEEN 1" in res.stdout  # it found one key ...
    scanner = MarkerScanner(prep.nonce)
    scanner.feed(res.stdout)
    assert scanner.close() == ["testing loss:"] and scanner.tainted is None  # ... a useless one


def test_a_marker_line_shared_with_program_code_is_dropped() -> None:
    inst = 'import os\nx = 1; print("loaded data")\nif x: print("trained model")\n'
    inst += 'print("imported packages")\n'
    prog = prepare_run(inst).program
    assert "'loaded data'" not in prog and "'trained model'" not in prog
    assert "'mlerl.marker', 'imported packages'" in prog


HOSTILE_SNIPPETS = [
    "f = globals()['_x']",
    "import gc",
    "from inspect import currentframe",
    "import ctypes",
    "import sys\nc = sys._getframe().f_code",
    "def f(): pass\nk = f.__code__.co_consts",
    "def f(): pass\nv = f.__closure__[0].cell_contents",
    "import sys\nsys.modules['pandas'] = object()",
    "from sys import modules",
    "exec('print(1)')",
    "x = eval('1')",
    "name = 'f_' + 'code'\ngetattr(object(), name)",
    "getattr(object(), 'f_code')",
    "import pandas as pd\npd.read_csv = lambda p: 0",
    "from sklearn.ensemble import RandomForestClassifier as R\nR.fit = lambda *a: None",
    "from sklearn.ensemble import RandomForestClassifier\nm = RandomForestClassifier()\nm.fit = print",
    "import pandas as pd\nsetattr(pd, 'read_csv', print)",
    "open('/proc/self/mem', 'rb')",
    "import sys\nsys.settrace(None)",
    "__builtins__.print('x')",
    "import importlib\npd = importlib.import_module('pandas')",
]
HONEST_SNIPPETS = [
    "import torch\ntorch.backends.cudnn.benchmark = True",
    "import pandas as pd\npd.options.display.max_columns = 50",
    "import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "net = Net()\nfor m in net.modules():\n    print(type(m).__name__, m.__class__.__name__)",
    "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'",
    "import traceback\ntry:\n    1 / 0\nexcept Exception:\n    traceback.print_exc()",
]


@pytest.mark.parametrize("code", HOSTILE_SNIPPETS)
def test_introspection_and_monkeypatching_drop_all_markers(code: str) -> None:
    program = "import numpy as np\nx = np.loadtxt(['1 2'])\n" + code + "\n"
    prep = _prepared(program)
    assert prep.untrusted is not None
    assert "mlerl.marker" not in prep.program.split("del _", 1)[1]  # no marker call survives


@pytest.mark.parametrize("code", HONEST_SNIPPETS)
def test_ordinary_ml_code_is_not_flagged(code: str) -> None:
    import ast

    assert untrusted_reason(ast.parse(code)) is None


@pytest.mark.parametrize(
    ("code", "absent"),
    [
        ("class pd:\n    read_csv = staticmethod(len)\ndf = pd.read_csv('x')\n", "loaded data"),
        ("import pandas as pd\npd = object()\ndf = pd.read_csv('x')\n", "loaded data"),
        ("import pandas\ndef f(pandas):\n    return pandas.read_csv('x')\n", "loaded data"),
        ("from mylib import read_csv\ndf = read_csv('x')\n", "loaded data"),
        (
            "class TinyModel:\n    def fit(self, X, y):\n        return self\n"
            "model = TinyModel()\nmodel.fit(1, 2)\n",
            "trained model",
        ),
        ("class TinyModel:\n    pass\nmodel = TinyModel()\n", "defined model"),
        (
            "from sklearn.linear_model import LinearRegression\nclass M(LinearRegression):\n"
            "    def fit(self, X, y):\n        return self\nm = M()\nm.fit(1, 2)\n",
            "trained model",
        ),
        (
            "from sklearn.linear_model import LinearRegression\nmodel = LinearRegression()\n"
            "model = object()\nmodel.fit(1, 2)\n",
            "trained model",
        ),
        (
            "class L:\n    def backward(self):\n        pass\nimport torch\n"
            "for i in range(2):\n    L().backward()\n",
            "trained model",
        ),
        ("for i in range(2):\n    loss.backward()\n", "training loss:"),  # no torch
        ("def my_loss(a, b):\n    return 0\nval_loss = my_loss(1, 2)\n", "testing loss:"),
        (
            "class Fake:\n    def predict(self, X):\n        return X\nclf = Fake()\np = clf.predict(1)\n",
            "predicted test labels",
        ),
    ],
)
def test_stage_names_alone_earn_no_marker(code: str, absent: str) -> None:
    assert f'print("{absent}"' not in instrument_ast(code)


def test_library_provenance_still_earns_markers() -> None:
    code = (
        "import pandas as pd\nimport torch\nimport torch.nn as nn\n"
        "from sklearn.ensemble import RandomForestClassifier as RF\n"
        "from sklearn.metrics import accuracy_score\n"
        "df = pd.read_csv('x')\n"
        "def build():\n    return RF(n_estimators=5)\n"
        "clf = build().fit(df, df)\n"
        "acc_val = accuracy_score(df, clf.predict(df))\n"
        "preds = clf.predict(df)\n"
        "class Net(nn.Module):\n    pass\n"
        "net = Net().to('cpu')\ncriterion = nn.MSELoss()\n"
        "for i in range(2):\n    loss = criterion(net(df), df)\n    loss.backward()\n"
    )
    out = instrument_ast(code)
    for m in ["imported packages", "loaded data", "defined model", "trained model",
              "testing loss:", "predicted test labels", "training loss:"]:  # fmt: skip
        assert f'print("{m}"' in out, m


PROGRAM = (
    "import sys\nimport pandas as pd\nfrom sklearn.linear_model import LinearRegression\n"
    "df = pd.read_csv('input/train.csv')\n"
    "model = LinearRegression()\n"
    "model.fit(df, df['y'])\n"
    "preds = model.predict(df)\n"
)


def _lm_result(answer_body: str):
    engine = FakeEngine(lambda prompt: (f"```python\n{answer_body}```", "stop"))
    return asyncio.run(LMInstrumenter(engine, config=LMInstrumentConfig()).instrument(PROGRAM))


def test_lm_answer_with_every_marker_after_import_sys_is_rejected() -> None:
    all_up_front = PROGRAM.replace(
        "import sys\n",
        "import sys\n"
        + "".join(
            f'print("{m}")\n'
            for m in [
                "imported packages",
                "loaded data",
                "defined model",
                "trained model",
                "predicted test labels",
            ]
        ),  # fmt: skip
    )
    result = _lm_result(all_up_front)
    assert (result.path, result.reason) == ("ast", "misplaced_marker")
    assert result.code == instrument_ast(PROGRAM)


@pytest.mark.parametrize(
    ("edit", "ok"),
    [
        (("model.fit(df, df['y'])\n", "model.fit(df, df['y'])\nprint(\"trained model\")\n"), True),
        (
            ("preds = model.predict(df)\n", 'preds = model.predict(df)\nprint("trained model")\n'),
            True,
        ),
        (
            (
                "model = LinearRegression()\n",
                'model = LinearRegression()\nprint("trained model")\n',
            ),
            False,
        ),
        (
            (
                "df = pd.read_csv('input/train.csv')\n",
                "print(\"loaded data\")\ndf = pd.read_csv('input/train.csv')\n",
            ),
            False,
        ),
        (
            (
                "df = pd.read_csv('input/train.csv')\n",
                "df = pd.read_csv('input/train.csv'); print(\"loaded data\")\n",
            ),
            False,
        ),
        (("model.fit(df, df['y'])\n", "model.fit(df, df['y'])\nif False:\n    pass\n"), None),
    ],
)
def test_lm_marker_must_follow_its_stage(edit: tuple[str, str], ok: bool | None) -> None:
    result = _lm_result(PROGRAM.replace(*edit))
    if ok is None:
        assert result.reason == "modified_program"
    else:
        assert (result.path == "lm") is ok, result.detail
        assert ok or result.reason == "misplaced_marker"


def test_lm_marker_after_a_branch_that_may_not_run_is_rejected() -> None:
    base = "import pandas as pd\nimport sys\nif len(sys.argv) > 5:\n    df = pd.read_csv('x')\n"
    engine = FakeEngine(lambda prompt: (f'```python\n{base}print("loaded data")\n```', "stop"))
    result = asyncio.run(LMInstrumenter(engine).instrument(base))
    assert result.reason == "misplaced_marker"
    inside = base + '    print("loaded data")\n'
    engine = FakeEngine(lambda prompt: (f"```python\n{inside}```", "stop"))
    assert asyncio.run(LMInstrumenter(engine).instrument(base)).path == "lm"
