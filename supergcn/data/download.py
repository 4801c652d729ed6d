"""Downloading a dataset's files so that a user can trust them, and restart them.

A dataset's source is a list of :class:`RemoteFile`: an address, where the file goes, and
what is recorded about it (its MD5 where the source or a named third party publishes one,
its exact size where the published counts fix it). :func:`download_all` fetches those not
yet there:

* before anything is fetched it checks the free space below the dataset's root against
  everything left to fetch (the sizes recorded, else what the server announces) plus what
  the caller will unpack or derive (``extra_bytes``), and refuses with both figures;
* a transfer cut short (a dropped connection, which ends the read silently, a timeout, a
  full disk) keeps its ``.part`` file and says so; the next run resumes it with an HTTP
  range request (a server that ignores the range starts it again; a part longer than the
  source is removed);
* the MD5 is computed as the bytes arrive; a file that arrives with another size or MD5
  than recorded is removed and refused; only a checked file is renamed into place, with
  its MD5 beside it in ``md5sum`` format (``<file>.md5``): where the source publishes no
  checksum, that is the record of what arrived.

A file already in place (downloaded before, or put there by hand) is not fetched again;
the loaders check what they read against its manifest and the published counts.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import re
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from supergcn.data.digests import feed_file
from supergcn.data.storage import human_bytes, refusing_full_disk
from supergcn.errors import SuperGCNError
from supergcn.progress import progress

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset's source: ``url``, fetched to ``path`` (below the dataset's
    root), with the ``md5`` and exact ``size`` in bytes recorded for it (``None`` where
    nothing is published)."""

    url: str
    path: str
    md5: str | None = None
    size: int | None = None


def file_md5(path: Path, digest=None):
    """``path``'s bytes fed to ``digest`` (a new MD5 by default), showing how far
    (:func:`~supergcn.data.digests.feed_file`)."""
    return feed_file(path, hashlib.md5() if digest is None else digest, f"checksum of {path.name}")


def _part(destination: Path) -> Path:
    return destination.with_name(destination.name + ".part")


class FetchFailed(SuperGCNError):
    """The source did not deliver the file: its server unreachable (no internet here, or
    the server down) or refusing the request."""


def _unreachable(url: str, destination: Path, exc: Exception) -> SuperGCNError:
    detail = f"HTTP {exc.code}" if isinstance(exc, urllib.error.HTTPError) else str(exc)
    return FetchFailed(f"could not download {url} ({detail})",
                             f"on a machine with internet fetch it to {destination}, then run again")


def announced_size(url: str, timeout: float = 60) -> int:
    """The bytes the server announces for ``url`` (a HEAD request's Content-Length)."""
    request = urllib.request.Request(url, method="HEAD")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return int(response.headers.get("Content-Length") or 0)


def check_space(root: Path, fetch_bytes: int, extra_bytes: int, what: str) -> None:
    """Refuse, with the figures, if ``root``'s file system lacks ``fetch_bytes + extra_bytes``."""
    existing = next(p for p in [root, *root.parents] if p.exists())
    free = shutil.disk_usage(existing).free
    if fetch_bytes + extra_bytes > free:
        raise SuperGCNError(f"no space for {what}: it needs {human_bytes(fetch_bytes + extra_bytes)} more "
                            f"({human_bytes(fetch_bytes)} to download, {human_bytes(extra_bytes)} to unpack or "
                            f"derive) and {human_bytes(free)} is free there",
                            "free space there, or pass a --raw-root on a larger file system")


def download(url: str, destination: str | Path, md5: str | None = None, size: int | None = None,
             extra_bytes: int = 0, timeout: float = 60) -> Path:
    """Fetch ``url`` to ``destination`` (see the module docstring); returns ``destination``.

    Raises:
        SuperGCNError: no space for it (or, for a file already there, for ``extra_bytes``),
            the server unreachable or refusing, a transfer cut short (its ``.part`` kept to
            resume), or a size or checksum that does not match the recorded one.
    """
    destination = Path(destination)
    if destination.is_file():
        check_space(destination.parent, 0, extra_bytes, f"what {destination} unpacks or derives")
        return destination
    part = _part(destination)
    have = _size(part)
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code != 416:
            raise FetchFailed(f"could not download {url} (HTTP {exc.code})",
                              f"check the address, or fetch it by hand to {destination}") from exc
        # 416: nothing lies past the part. It is the whole file only if the source's length
        # (``Content-Range: bytes */N``) is the part's.
        total = re.fullmatch(r"bytes \*/(\d+)", exc.headers.get("Content-Range", "") if exc.headers else "")
        if total and int(total.group(1)) != have:
            part.unlink()
            raise SuperGCNError(f"the partial download {part} ({have:,} bytes) is longer than {url} "
                                f"({int(total.group(1)):,} bytes): it was of another file",
                                "run again to download it afresh (the part was removed)") from exc
        response = None
    except OSError as exc:
        raise _unreachable(url, destination, exc) from exc
    digest = hashlib.md5()
    if response is not None:
        with response:
            resumed = have and response.status == 206
            if resumed:
                first = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
                if first is None or int(first.group(1)) != have:
                    raise SuperGCNError(f"{url} answered a resume from byte {have:,} with "
                                        f"{response.headers.get('Content-Range')!r}",
                                        f"delete {part} to download it afresh")
                file_md5(part, digest)
            announced = response.headers.get("Content-Length")
            check_space(destination.parent, int(announced or 0), extra_bytes, str(destination))
            destination.parent.mkdir(parents=True, exist_ok=True)
            received = 0
            already = have if resumed else 0
            try:
                with open(part, "ab" if resumed else "wb") as handle, \
                        progress(f"download {destination.name}", total=already + int(announced) if announced else None,
                                 unit="B", scale=True, initial=already) as bar:
                    while chunk := response.read(CHUNK_BYTES):
                        handle.write(chunk)
                        digest.update(chunk)
                        received += len(chunk)
                        bar.update(len(chunk))
            except (OSError, http.client.HTTPException) as exc:
                if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise SuperGCNError(f"no space left for {part} after {human_bytes(_size(part))}",
                                        "free space there and run again: it resumes") from exc
                raise _interrupted(url, part, exc) from exc
            if announced is not None and received < int(announced):
                raise _interrupted(url, part, f"{received:,} of {int(announced):,} bytes arrived")
    else:
        file_md5(part, digest)
    arrived = part.stat().st_size
    problem = None
    if size is not None and arrived != size:
        problem = f"{url} arrived with {arrived:,} bytes, not the {size:,} recorded"
    elif md5 is not None and digest.hexdigest() != md5:
        problem = f"{url} arrived with another checksum than recorded (MD5 {md5})"
    if problem:
        part.unlink()
        raise SuperGCNError(f"{problem}: damaged in transit or changed at the source",
                            f"run again to download it afresh (removed {part})")
    destination.with_name(destination.name + ".md5").write_text(f"{digest.hexdigest()}  {destination.name}\n")
    part.replace(destination)
    return destination


def _interrupted(url: str, part: Path, cause) -> SuperGCNError:
    return SuperGCNError(f"the download of {url} was cut short ({cause}); {human_bytes(_size(part))} are in {part}",
                         "run again: it resumes from there")


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def download_all(files: Sequence[RemoteFile], root: str | Path, extra_bytes: int = 0,
                 timeout: float = 60) -> list[Path]:
    """Fetch every file of ``files`` not yet below ``root`` (see the module docstring),
    the space for all of them and ``extra_bytes`` checked before the first starts."""
    root = Path(root)
    missing = [remote for remote in files if not (root / remote.path).is_file()]
    to_fetch = 0
    for remote in missing:
        part = _part(root / remote.path)
        try:
            total = remote.size if remote.size is not None else announced_size(remote.url, timeout)
        except urllib.error.HTTPError:
            total = 0  # a server that answers no HEAD: its GET's length is checked when it starts
        except OSError as exc:
            wanted = "; ".join(f"{each.url} to {root / each.path}" for each in missing)
            raise FetchFailed(f"could not reach {remote.url} ({exc}) to download {len(missing)} files",
                                    f"on a machine with internet fetch {wanted}, then run again") from exc
        to_fetch += max(0, total - _size(part))
    if missing:
        check_space(root, to_fetch, extra_bytes, f"{len(missing)} files under {root}")
    return [download(remote.url, root / remote.path, remote.md5, remote.size, timeout=timeout) for remote in files]


#: The suffix of files that arrived as another graph than the one published.
UNEXPECTED_SUFFIX = ".unexpected"


def refuse_unexpected(paths: Sequence[Path], what: str, check: str) -> None:
    """Refuse files that arrived as another graph than the published one (``what`` says how):
    rename each of ``paths`` (and its ``.md5`` beside it) with :data:`UNEXPECTED_SUFFIX`, so
    that the next run neither prepares them nor takes them for the graph, and raise.

    Raises:
        SuperGCNError: always, naming the files kept and where to ``check`` the source.
    """
    for path in paths:
        for arrived in (path, path.with_name(path.name + ".md5")):
            if arrived.exists():
                arrived.rename(arrived.with_name(arrived.name + UNEXPECTED_SUFFIX))
    raise SuperGCNError(f"{what} (the files are kept with the suffix {UNEXPECTED_SUFFIX})",
                        f"the source changed: {check} before preparing it, and rename the files to use them all the "
                        "same")


def read_md5sums(path: Path) -> dict[str, str]:
    """``{file name: MD5}`` of an ``md5sum`` listing (``<md5>  <name>`` lines; a ``*``
    before the name marks binary mode)."""
    sums = {}
    for line in path.read_text().splitlines():
        fields = line.split(maxsplit=1)
        if len(fields) == 2 and len(fields[0]) == 32:
            sums[fields[1].lstrip("*").strip()] = fields[0].lower()
    return sums


def unpack(archive: Path, root: Path, folder: str) -> Path:
    """Unpack ``archive`` (zip or tar), whose members lie below ``folder``, into
    ``root/folder`` through a staging folder beside it, so that an interrupted unpacking
    leaves nothing a loader could take for the dataset; the archive is removed once
    unpacked. Returns ``root/folder``."""
    import tarfile
    import zipfile
    import zlib

    target, staging = root / folder, root / f".{folder}.unpacking"
    if target.exists() and any(target.iterdir()):
        raise SuperGCNError(f"{target} already holds files, so {archive.name} is not unpacked over them",
                            f"move them away (or delete {target}) and run again")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with refusing_full_disk(target):
            try:
                if zipfile.is_zipfile(archive):
                    with zipfile.ZipFile(archive) as bundle:
                        members = bundle.infolist()
                        with progress(f"unpack {archive.name}", total=sum(member.file_size for member in members),
                                      unit="B", scale=True) as bar:
                            for member in members:
                                bundle.extract(member, staging)
                                bar.update(member.file_size)
                else:
                    # The archive's checksum matched the recorded one; the "data" filter, where
                    # this Python has it, keeps every member below the staging folder all the same.
                    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                    # A compressed tar's size unpacked is known only at its end: the bar counts up.
                    with tarfile.open(archive) as bundle, progress(f"unpack {archive.name}", unit="B",
                                                                   scale=True) as bar:
                        for member in bundle:
                            bundle.extract(member, staging, **safe)
                            bar.update(member.size)
            except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as exc:
                raise SuperGCNError(f"{archive} could not be unpacked ({type(exc).__name__}: {exc}): it is damaged",
                                    "delete it to download it again") from exc
        if not (staging / folder).is_dir():
            raise SuperGCNError(f"{archive} does not unpack to a folder {folder}",
                                "it is not the archive expected: delete it and run again")
        if target.exists():
            target.rmdir()
        (staging / folder).replace(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    archive.unlink()
    archive.with_name(archive.name + ".md5").unlink(missing_ok=True)
    return target
