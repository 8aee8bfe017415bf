"""Downloads: every MedMNIST 2D file from its official record (URL and md5 from ``medmnist.INFO``), checked and
written atomically into the data directory. The ISIC 2018 archives and the ChestX-ray14 instructions are in
:mod:`helpers.data.fetch_archives`; the command line is ``python -m helpers.data fetch NAME``
(:mod:`helpers.data.__main__`).

A download streams into a uniquely named temporary file next to its target (:func:`helpers.utils.write_atomically_with`)
while its md5 is computed; the length must equal the server's ``Content-Length`` and the md5 medmnist's, and only
then is the file renamed into place. A wrong md5, an interrupted transfer or Ctrl-C leaves nothing behind: never a
partial file under the real name. (medmnist's own ``download=True`` goes through torchvision's ``download_url``,
which writes straight to the final name and leaves a corrupt file there when the md5 check fails; so the URL and md5
are medmnist's, the writer is the course's.)

**Tests only:** the environment variable ``CALIBMED_FETCH_TEST_SOURCES`` holds a JSON object that maps file names
(``"dermamnist.npz"``, ``"ISIC2018_Task3_Test_Input.zip"``) to ``{"url": ..., "md5": ...}`` on a server on this
machine (loopback addresses only: any other host is refused), so that the download path runs offline against
generated files. Unset, every file comes from its official source.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlparse

from medmnist import INFO

from helpers.data.locations import resolve_data_dir
from helpers.data.medmnist_files import MEDMNIST_2D, MEDMNIST_SIZES, medmnist_filename
from helpers.utils import DATA_DIR_ENV, format_duration, progress_mode, write_atomically_with

#: tests only: a JSON object {file name: {"url": loopback URL, "md5": ...}} that replaces the official sources
TEST_SOURCES_ENV = "CALIBMED_FETCH_TEST_SOURCES"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: seconds a connection attempt or one read may take before the download counts as failed
TIMEOUT_SECONDS = 30
CHUNK_BYTES = 1 << 20
USER_AGENT = "CalibMed-course (python urllib)"


class FetchError(RuntimeError):
    """A download that could not be made or was refused: the host did not answer, the server refused, the transfer
    stopped early or the md5 differs. Nothing was written under the target's name."""


@dataclass(frozen=True)
class Source:
    """Where one file comes from: its URL, its md5 (None where the publisher gives none) and its file name."""

    url: str
    md5: str | None
    filename: str


def fetch_command(name: str, image_size: int = 28) -> str:
    """The command that downloads a data set: ``python -m helpers.data fetch dermamnist [--size 64]``."""
    return f"python -m helpers.data fetch {name}" + ("" if image_size == 28 else f" --size {image_size}")


def _test_sources() -> dict[str, dict[str, str]]:
    """The test override (:data:`TEST_SOURCES_ENV`), checked: a JSON object of loopback URLs; {} when unset."""
    text = os.environ.get(TEST_SOURCES_ENV, "")
    if not text.strip():
        return {}
    unset = f"it is for tests only: unset {TEST_SOURCES_ENV} to download from the official sources"
    try:
        sources = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{TEST_SOURCES_ENV} is not JSON ({error}); {unset}") from None
    if not isinstance(sources, dict):
        raise ValueError(f"{TEST_SOURCES_ENV} must be a JSON object {{file name: {{url, md5}}}}; {unset}")
    for filename, entry in sources.items():
        url = entry.get("url") if isinstance(entry, dict) else None
        if not isinstance(url, str) or urlparse(url).hostname not in LOOPBACK_HOSTS:
            raise ValueError(
                f"{TEST_SOURCES_ENV} gives {filename!r} the source {entry!r}: only a URL on this machine "
                f"({', '.join(LOOPBACK_HOSTS)}) is allowed; {unset}"
            )
    return sources


def with_test_sources(source: Source) -> Source:
    """``source``, or the local test server's URL and md5 for its file name when :data:`TEST_SOURCES_ENV` names it."""
    entry = _test_sources().get(source.filename)
    if entry is None:
        return source
    return Source(entry["url"], entry.get("md5"), source.filename)


def medmnist_source(name: str, image_size: int = 28) -> Source:
    """The official URL and md5 of a MedMNIST 2D file (``medmnist.INFO``) and the name the course reads it under."""
    if name not in MEDMNIST_2D:
        raise ValueError(f"unknown MedMNIST 2D data set {name!r}; valid names: {', '.join(MEDMNIST_2D)}")
    if image_size not in MEDMNIST_SIZES:
        raise ValueError(f"MedMNIST 2D comes in sizes {MEDMNIST_SIZES}, got image_size={image_size!r}")
    key = "" if image_size == 28 else f"_{image_size}"
    info = INFO[name]
    return with_test_sources(Source(info[f"url{key}"], info[f"MD5{key}"], medmnist_filename(name, image_size)))


def not_writable(directory: Path) -> str:
    """The message for a data directory that files cannot be written into."""
    return (
        f"the data directory {directory} is not writable: nothing was downloaded. Make it writable, or choose "
        f"another folder with --data-dir or the environment variable {DATA_DIR_ENV}."
    )


def writable_directory(directory: str | os.PathLike) -> Path:
    """``directory``, created when missing; PermissionError (naming it and how to fix it) when files cannot be
    written there. Checked before a download starts, so that no time is spent on a file that cannot be kept."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PermissionError(f"{not_writable(directory)} ({error.strerror})") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(not_writable(directory))
    return directory


def size_text(n_bytes: float | None) -> str:
    """``19.7 MB``, ``2.6 GB`` (decimal units); ``unknown size`` for None."""
    if n_bytes is None:
        return "unknown size"
    for unit in ("B", "kB", "MB", "GB"):
        if n_bytes < 1000 or unit == "GB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1000
    raise AssertionError("unreachable")


def _reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None) or error
    return f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__


def _open(url: str, method: str = "GET") -> http.client.HTTPResponse:
    """The server's response to ``url``; FetchError naming the URL when it does not answer or refuses."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT}, method=method)
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as error:
        raise FetchError(f"{url} answered HTTP {error.code} ({error.reason})") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:  # no network, refused, timed out
        raise FetchError(f"could not reach {url} ({_reason(error)})") from None


def remote_size(source: Source) -> int | None:
    """The size the server gives for ``source`` (a HEAD request's Content-Length), or None if it gives none."""
    with _open(source.url, method="HEAD") as response:
        length = response.headers.get("Content-Length")
    return int(length) if length is not None and length.isdigit() else None


class _Progress:
    """Bytes received: a tqdm bar, or one line at the end, by :func:`helpers.utils.progress_mode`."""

    def __init__(self, desc: str, total: int | None):
        self.desc, self.total, self.done = desc, total, 0
        self.mode = progress_mode()
        self.started = time.perf_counter()
        self.bar = None
        if self.mode == "bar":
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1000, leave=True)

    def update(self, n_bytes: int) -> None:
        self.done += n_bytes
        if self.bar is not None:
            self.bar.update(n_bytes)

    def close(self, finished: bool) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.mode == "final" and finished:
            duration = format_duration(time.perf_counter() - self.started)
            print(f"{self.desc}: {size_text(self.done)} in {duration}", flush=True)


def _copy_checked(response: http.client.HTTPResponse, file: BinaryIO, total: int | None, source: Source) -> None:
    """Stream ``response`` into ``file``; FetchError when fewer bytes than announced arrive or the md5 differs."""
    digest, received = hashlib.md5(), 0
    progress = _Progress(source.filename, total)
    finished = False
    try:
        while True:
            try:
                chunk = response.read(CHUNK_BYTES)
            except (OSError, http.client.HTTPException) as error:  # reset, timed out, incomplete chunked read
                raise FetchError(
                    f"the download of {source.url} was interrupted after {size_text(received)} ({_reason(error)})"
                ) from None
            if not chunk:
                break
            file.write(chunk)
            digest.update(chunk)
            received += len(chunk)
            progress.update(len(chunk))
        finished = True
    finally:
        progress.close(finished)
    if total is not None and received != total:
        raise FetchError(f"the download of {source.url} was interrupted: {received:,} of its {total:,} bytes arrived")
    if source.md5 is not None and digest.hexdigest() != source.md5:
        raise FetchError(
            f"{source.filename} from {source.url} has md5 {digest.hexdigest()}, not the official {source.md5}: refused"
        )


def download(source: Source, target: str | os.PathLike) -> Path:
    """Download ``source`` to ``target`` atomically: streamed into a temporary file next to it, checked (length and
    md5), then renamed into place. FetchError when the host does not answer, the transfer stops early or the md5
    differs; PermissionError when the folder is not writable. Either way nothing is left under ``target``'s name
    (a file already there stays as it was) and no temporary file is left behind."""
    target = Path(target)
    writable_directory(target.parent)
    with _open(source.url) as response:
        total = response.length  # Content-Length (None when the server streams without one); read() counts it down
        try:
            write_atomically_with(target, lambda file: _copy_checked(response, file, total, source))
        except FetchError as error:
            raise FetchError(f"{error}; nothing was written to {target}") from None
        except PermissionError:
            raise PermissionError(not_writable(target.parent)) from None
        except OSError as error:  # e.g. the disk is full
            raise OSError(
                f"could not write {target} ({error.strerror or error}); nothing was kept. Free some space or "
                f"choose another data directory ({DATA_DIR_ENV})."
            ) from None
    return target


def by_hand(source: Source, target: Path) -> str:
    """How to put a file in place without this module: where to download it, its md5 and where it goes."""
    md5 = f" (md5 {source.md5})" if source.md5 else ""
    return f"To put it there by hand, download {source.url}{md5} and save it as {target}"


def fetch_medmnist(
    name: str, image_size: int = 28, data_dir: str | os.PathLike | None = None, force: bool = False
) -> Path:
    """Download the MedMNIST 2D file ``name`` at ``image_size`` px from its official record into the data
    directory (the name :func:`helpers.data.load_medmnist` reads), md5-checked, with a progress bar; a file already
    there is kept unless ``force``. Returns its path."""
    source = medmnist_source(name, image_size)
    directory = resolve_data_dir(data_dir)
    target = directory / source.filename
    try:
        present = target.is_file()
    except OSError as error:  # e.g. a folder on the way that this user may not enter
        raise PermissionError(
            f"cannot look into the data directory {directory} ({error.strerror}): make it readable and writable, or "
            f"choose another folder with --data-dir or the environment variable {DATA_DIR_ENV}."
        ) from None
    if present and not force:
        print(f"{target} is already there (pass --force to download it again)")
        return target
    info = INFO[name]
    print(
        f"downloading {info['python_class']} ({name}, {image_size} px; licence {info['license']}) from "
        f"{source.url} into {directory}",
        flush=True,
    )
    try:
        download(source, target)
    except FetchError as error:
        raise FetchError(f"{error}. {by_hand(source, target)}") from None
    print(f"{target}: md5 {source.md5} checked", flush=True)
    return target
