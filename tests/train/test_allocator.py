"""The relaunch with a retaining allocator, checked in fresh child processes."""

import json
import os
import subprocess
import sys

import pytest

from supergcn.errors import SuperGCNError
from supergcn.train.allocator import ALLOCATOR_ENV, RETAINING_MALLOC_CONF, find_jemalloc, requested_library

PROBE = ("from supergcn.train.allocator import allocator_in_use, relaunch_with_retaining_allocator; "
         "relaunch_with_retaining_allocator(); import json, os; "
         "print(json.dumps({**allocator_in_use(), 'guard': os.environ.get('SUPERGCN_ALLOCATOR_RELAUNCHED')}))")


def probe(**environment):
    env = {key: value for key, value in os.environ.items()
           if key not in ("LD_PRELOAD", "MALLOC_CONF", ALLOCATOR_ENV, "SUPERGCN_ALLOCATOR_RELAUNCHED")}
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60,
                            env={**env, **environment})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_auto_relaunches_with_jemalloc_where_it_is_installed():
    library = find_jemalloc()
    if library is None:
        pytest.skip("no jemalloc on this machine (Debian: apt-get install libjemalloc2): glibc is the fallback")
    used = probe()
    # The relaunched process drops its guard, so that its own children choose afresh.
    assert used == {"name": "jemalloc", "library": str(library.resolve()), "malloc_conf": RETAINING_MALLOC_CONF,
                    "guard": None}


def test_glibc_on_request_and_another_preloaded_allocator_are_kept():
    assert probe(**{ALLOCATOR_ENV: "glibc"})["name"] == "glibc"
    # A user's own malloc in LD_PRELOAD wins (here one that does not load: glibc stays).
    assert probe(LD_PRELOAD="/nonexistent/libtcmalloc.so")["name"] == "glibc"


def test_a_users_malloc_conf_is_kept():
    if find_jemalloc() is None:
        pytest.skip("no jemalloc on this machine")
    assert probe(MALLOC_CONF="narenas:2")["malloc_conf"] == "narenas:2"


def test_a_missing_library_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(ALLOCATOR_ENV, str(tmp_path / "libjemalloc.so.2"))
    with pytest.raises(SuperGCNError, match="is not a file — point it at libjemalloc"):
        requested_library()
