"""The relaunch with a retaining allocator, checked in fresh child processes."""

import json
import os
import subprocess
import sys

import pytest

from supergcn.errors import SuperGCNError
from supergcn.train import allocator
from supergcn.train.allocator import (
    ALLOCATOR_ENV,
    RETAINING_SETTINGS,
    allocator_name,
    find_jemalloc,
    find_mimalloc,
    requested_library,
)

PROBE = ("from supergcn.train.allocator import allocator_in_use, relaunch_with_retaining_allocator; "
         "relaunch_with_retaining_allocator(); import json, os; "
         "print(json.dumps({**allocator_in_use(), 'guard': os.environ.get('SUPERGCN_ALLOCATOR_RELAUNCHED')}))")


def probe(**environment):
    env = {key: value for key, value in os.environ.items()
           if key not in ("LD_PRELOAD", ALLOCATOR_ENV, "SUPERGCN_ALLOCATOR_RELAUNCHED")
           and not key.startswith(("MALLOC_CONF", "MIMALLOC_"))}
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60,
                            env={**env, **environment})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_auto_relaunches_with_the_mimalloc_the_project_installs():
    library = find_mimalloc()
    assert library is not None, "cmeel-mimalloc is a dependency of the project on Linux"
    used = probe()
    # The relaunched process drops its guard, so that its own children choose afresh.
    assert used == {"name": "mimalloc", "library": str(library.resolve()),
                    "settings": dict([RETAINING_SETTINGS["mimalloc"]]), "guard": None}


def test_jemalloc_on_request_where_it_is_installed():
    library = find_jemalloc()
    if library is None:
        pytest.skip("no jemalloc on this machine (Debian: apt-get install libjemalloc2)")
    used = probe(**{ALLOCATOR_ENV: "jemalloc"})
    assert used == {"name": "jemalloc", "library": str(library.resolve()),
                    "settings": dict([RETAINING_SETTINGS["jemalloc"]]), "guard": None}


def test_glibc_on_request_and_another_preloaded_allocator_are_kept():
    assert probe(**{ALLOCATOR_ENV: "glibc"})["name"] == "glibc"
    # A user's own malloc in LD_PRELOAD wins (here one that does not load: glibc stays).
    assert probe(LD_PRELOAD="/nonexistent/libtcmalloc.so")["name"] == "glibc"


def test_an_allocator_the_user_preloads_is_recognised_with_its_settings():
    library = str(find_mimalloc())
    used = probe(LD_PRELOAD=library, MIMALLOC_PURGE_DELAY="5", MALLOC_CONF="narenas:2")
    assert (used["name"], used["settings"], used["guard"]) == ("mimalloc", {"MIMALLOC_PURGE_DELAY": "5"}, None)


def test_a_users_setting_is_kept():
    assert probe(MIMALLOC_PURGE_DELAY="250")["settings"] == {"MIMALLOC_PURGE_DELAY": "250"}


@pytest.mark.parametrize(("library", "name"), [
    ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "jemalloc"),
    ("/site-packages/cmeel.prefix/lib/libmimalloc.so", "mimalloc"),
    ("/usr/lib/libtcmalloc_minimal.so.4", "tcmalloc"),
    ("/usr/lib/x86_64-linux-gnu/libc.so.6", None),
    ("/usr/lib/x86_64-linux-gnu/libmpi.so.12", None),
])
def test_a_malloc_is_named_from_its_library_file(library, name):
    assert allocator_name(library) == name


def test_a_missing_library_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(ALLOCATOR_ENV, str(tmp_path / "libjemalloc.so.2"))
    with pytest.raises(SuperGCNError, match="is not a file — point it at a malloc library"):
        requested_library()


@pytest.mark.parametrize("name", ["mimalloc", "jemalloc"])
def test_an_allocator_asked_for_by_name_and_not_found_is_a_clear_error(monkeypatch, name):
    monkeypatch.setitem(allocator._FINDERS, name, lambda: None)
    monkeypatch.setenv(ALLOCATOR_ENV, name)
    with pytest.raises(SuperGCNError, match=f"no {name} library was found"):
        requested_library()
