"""Downloading a dataset's archive so that a user can trust it, and restart it.

:func:`download` fetches ``url`` into ``destination`` through ``destination.part``:

* before anything is fetched it checks the free space below ``destination`` against
  what is left to fetch plus what the caller will unpack (``extra_bytes``), and refuses
  with both figures;
* an interrupted download resumes from its ``.part`` file with an HTTP range request (a
  server that ignores the range starts it again);
* the whole file's MD5 is compared with the recorded one once it is complete, and only
  a match is renamed into place; a mismatch removes the ``.part`` file and says so.
"""

from __future__ import annotations

import hashlib
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from supergcn.data.storage import human_bytes
from supergcn.errors import SuperGCNError

CHUNK_BYTES = 1 << 20


def file_md5(path: Path, digest=None):
    """``path``'s bytes fed to ``digest`` (a new MD5 by default), a chunk at a time."""
    digest = hashlib.md5() if digest is None else digest
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest


def download(url: str, destination: str | Path, md5: str, extra_bytes: int = 0, timeout: float = 60) -> Path:
    """Fetch ``url`` to ``destination`` (see the module docstring); returns ``destination``.

    Raises:
        SuperGCNError: no space for it, the server unreachable or refusing, or a checksum
            that does not match.
    """
    destination = Path(destination)
    if destination.is_file() and file_md5(destination).hexdigest() == md5:
        return destination
    destination.parent.mkdir(parents=True, exist_ok=True)
    part = destination.with_name(destination.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code != 416:  # 416: the part is already whole
            raise SuperGCNError(f"could not download {url} (HTTP {exc.code})",
                                f"check the address, or fetch it by hand to {destination}") from exc
        response = None
    except OSError as exc:
        raise SuperGCNError(f"could not download {url} ({exc})",
                            f"on a machine with internet fetch it to {destination}, then run again") from exc
    if response is not None:
        with response:
            resumed = have and response.status == 206
            remaining = int(response.headers.get("Content-Length") or 0)
            free = shutil.disk_usage(destination.parent).free
            if remaining + extra_bytes > free:
                raise SuperGCNError(f"no space for {destination}: it needs {human_bytes(remaining + extra_bytes)} more "
                                    f"({human_bytes(remaining)} to download, {human_bytes(extra_bytes)} to unpack) and "
                                    f"{human_bytes(free)} is free there",
                                    "free space there, or pass a --raw-root on a larger file system")
            with open(part, "ab" if resumed else "wb") as handle:
                while chunk := response.read(CHUNK_BYTES):
                    handle.write(chunk)
    if file_md5(part).hexdigest() != md5:
        part.unlink()
        raise SuperGCNError(f"{url} arrived with another checksum than recorded (MD5 {md5}): damaged in transit "
                            "or changed at the source", f"run again to download it afresh (removed {part})")
    part.replace(destination)
    return destination
