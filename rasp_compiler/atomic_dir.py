"""Write an artifact directory (a compiled model, a universal transformer, a backbone) so that it
holds its old content or the new one, whole, at every instant, and never writes through a link.

The protocol (every artifact directory ``DIR`` is written through ``write_directory``):

1. Refuse ``DIR`` when it is a symbolic link, or a file.  Refuse a non-empty ``DIR`` that does not
   hold an artifact of the same kind (``is_ours``) unless ``force`` is given.
2. Recover: a leftover ``.NAME.tmp-PID-XXXX`` or ``.NAME.old-PID-XXXX`` beside ``DIR`` (``NAME``
   is ``DIR``'s name) whose process ``PID`` has ended is what a killed writer left.  If ``DIR`` is
   missing and an ``.old-`` one is there, that one holds the old artifact: it is renamed back to
   ``DIR``.  Otherwise its entries that are not artifact files (a user's notes, a plot) are moved
   into ``DIR`` where ``DIR`` has no entry of that name, and the rest is removed.  Stale
   safetensors temporaries inside ``DIR`` (``.tmpXXXXXX``, a writer killed mid-file) are removed.
3. Write every file into a fresh ``.NAME.tmp-PID-XXXX`` beside ``DIR`` (same file system), give
   each the mode the user's umask gives a new file, fsync each file and the directory.
4. Swap it into place: where ``DIR`` does not exist, one ``rename``.  Otherwise, on Linux, one
   ``renameat2(RENAME_EXCHANGE)``: ``DIR`` and the temporary directory trade places atomically, so
   there is no instant without a whole ``DIR``.  Where the kernel or file system cannot exchange,
   ``DIR`` is renamed to ``.NAME.old-PID-XXXX`` and the new one renamed into place (a crash between
   the two renames leaves no ``DIR``; step 2 of the next write renames the old one back).
5. Move the old directory's other entries (not artifact files) into the new ``DIR``, fsync, and
   remove the old directory.

``force`` into a non-empty directory that is not an artifact of ours replaces the artifact's files
one by one instead (each by a rename, which replaces a link itself, never its target): the
directory may be a user's own (``-o .``), so it is neither swapped nor emptied.

Nothing is written through a link: the files are created in a directory this process made, and a
rename replaces the name it is given.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from rasp_compiler.errors import ArtifactError, file_in_the_way

# a temporary name beside DIR: ".NAME.tmp-PID-XXXX" (being written, or swapped out by an
# exchange) or ".NAME.old-PID-XXXX" (the old DIR, renamed aside where there is no exchange)
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-[A-Za-z0-9_]+$")
# safetensors' own temporary file (save_file writes ".tmpXXXXXX" in the target's directory and
# renames it), left behind when a writer was killed mid-file
_SAFETENSORS_TEMP = re.compile(r"^\.tmp[A-Za-z0-9]{6}$")
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100

# a hook for tests only: when RASP_TEST_WRITE_PAUSE is set (seconds), each file write pauses that
# long, so that a test can kill a writer while it writes (tests/test_hardening_files.py)
_PAUSE_ENV = "RASP_TEST_WRITE_PAUSE"


def umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a file created now gets: 0666 less the umask (what ``open`` gives)."""
    return 0o666 & ~umask()


def fsync_path(path: str | Path) -> None:
    """Flush a file or directory to disk, where the system allows it (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # not every system opens directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a temporary it names is not stale while it does."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (PermissionError): alive
        return True
    return True


def _exchange(a: str, b: str) -> bool:
    """Swap the paths ``a`` and ``b`` atomically (Linux renameat2); False where it is not
    supported (another system, an old kernel, a file system without it)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def _is_real_dir(path: str | Path) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _carry_entries(old: str, new: str, artifact_files: Iterable[str]) -> None:
    """Move the entries of ``old`` that are not artifact files (nor stale temporaries) into
    ``new``, where ``new`` has no entry of that name."""
    skip = set(artifact_files)
    try:
        names = os.listdir(old)
    except OSError:
        return
    for name in names:
        if name in skip or _SAFETENSORS_TEMP.match(name):
            continue
        target = os.path.join(new, name)
        if not os.path.lexists(target):
            try:
                os.rename(os.path.join(old, name), target)
            except OSError:
                pass


def _remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)  # rmtree removes links, never what they point to


def recover(directory: str | Path, artifact_files: Iterable[str]) -> list[str]:
    """Step 2 of the protocol: finish or undo what a killed writer left beside ``directory``;
    returns the leftovers it handled."""
    directory = os.path.abspath(os.fspath(directory))
    parent, name = os.path.split(directory)
    artifact_files = tuple(artifact_files)
    handled = []
    try:
        entries = sorted(os.listdir(parent))
    except OSError:
        return handled
    leftovers = []
    for entry in entries:
        m = _LEFTOVER.match(entry)
        path = os.path.join(parent, entry)
        if m and m["name"] == name and not process_alive(int(m["pid"])) and _is_real_dir(path):
            leftovers.append((m["kind"], os.path.join(parent, entry)))
    # an ".old-" directory first: where DIR is missing, it is the old artifact, whole
    for kind, path in sorted(leftovers, key=lambda kp: kp[0] != "old"):
        if kind == "old" and not os.path.lexists(directory):
            os.rename(path, directory)
        else:
            if _is_real_dir(directory):
                _carry_entries(path, directory, artifact_files)
            _remove_tree(path)
        handled.append(path)
    if _is_real_dir(directory):
        for entry in os.listdir(directory):
            p = os.path.join(directory, entry)
            if _SAFETENSORS_TEMP.match(entry) and os.path.isfile(p) and not os.path.islink(p):
                try:
                    os.unlink(p)
                    handled.append(p)
                except OSError:
                    pass
    return handled


def check_destination(directory: str | os.PathLike, *, artifact_files: Iterable[str],
                      is_ours: Callable[[str], bool], what: str = "the model", force: bool = False) -> bool:
    """Refuse a destination ``write_directory`` would refuse (ArtifactError): a link, a file, a
    non-empty directory that holds no artifact of ours (unless ``force``).  True when the
    directory is missing, empty or ours (it will be swapped whole); False for ``force`` into a
    foreign directory (its artifact files are replaced one by one).  A command calls it before a
    long compile, so that a bad destination is refused at once."""
    shown = os.fspath(directory)
    directory = os.path.abspath(shown)
    if os.path.islink(directory):
        raise ArtifactError(f"{shown}: cannot write {what} there: it is a symbolic link (to "
                            f"{os.readlink(directory)})",
                            hint="give the directory itself, not a link to it")
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise ArtifactError(f"{shown}: cannot write {what} there: it is a file, not a directory",
                            hint="give a directory to write the model to")
    blocker = file_in_the_way(os.path.dirname(shown))  # the write would say only "Not a directory"
    if blocker is not None:
        raise ArtifactError(f"{shown}: cannot write {what} there: {blocker} is a file, not a directory",
                            hint="write it inside a directory")
    try:
        foreign = os.path.isdir(directory) and bool(os.listdir(directory)) and not is_ours(directory)
    except OSError as err:
        raise ArtifactError(f"{shown}: cannot write {what} ({err.strerror or err})") from None
    if foreign and not force:
        files = " and ".join(artifact_files)
        raise ArtifactError(f"{shown}: cannot write {what} there: the directory is not empty and "
                            f"does not hold one (no {files} written by rasp-compiler)",
                            hint=f"give a new or empty directory, or --force (force=True from Python) to "
                                 f"replace {files} in it (its other files are kept)")
    return not foreign


def write_directory(directory: str | os.PathLike, write: Callable[[str], None], *,
                    artifact_files: Iterable[str], is_ours: Callable[[str], bool],
                    what: str = "the model", force: bool = False) -> None:
    """Write the artifact directory ``directory`` by the protocol above: ``write(tmp)`` writes the
    files named ``artifact_files`` into the directory ``tmp``; ``is_ours(directory)`` says whether
    an existing non-empty directory holds an artifact of this kind (replaced without ``force``).
    ArtifactError, naming ``directory``, when it cannot be written; ``directory`` is then as
    it was."""
    shown = os.fspath(directory)
    directory = os.path.abspath(shown)
    artifact_files = tuple(artifact_files)
    check_destination(shown, artifact_files=artifact_files, is_ours=is_ours, what=what, force=True)
    parent, name = os.path.split(directory)
    try:
        if os.path.lexists(parent) and not os.path.isdir(parent):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent)
        os.makedirs(parent, exist_ok=True)
    except OSError as err:  # a parent that is a file, a read-only place
        raise ArtifactError(f"{shown}: cannot write {what} ({err.strerror or err})") from None
    try:
        recover(directory, artifact_files)
    except OSError as err:
        raise ArtifactError(f"{shown}: cannot recover what an interrupted write left beside it "
                            f"({err.strerror or err})") from None
    # after the recovery, which may have renamed the old artifact back
    in_place = not check_destination(shown, artifact_files=artifact_files, is_ours=is_ours,
                                     what=what, force=force)
    exists = os.path.isdir(directory)
    mask = umask()
    tmp = None
    try:
        tmp = tempfile.mkdtemp(prefix=f".{name}.tmp-{os.getpid()}-", dir=parent)
        write(tmp)
        for entry in os.listdir(tmp):
            path = os.path.join(tmp, entry)
            os.chmod(path, 0o666 & ~mask)  # safetensors' temporary files come out 0600
            fsync_path(path)
        os.chmod(tmp, (os.stat(directory).st_mode & 0o7777) if exists else 0o777 & ~mask)
        fsync_path(tmp)
        if in_place:
            for entry in artifact_files:
                if os.path.exists(os.path.join(tmp, entry)):
                    os.replace(os.path.join(tmp, entry), os.path.join(directory, entry))
            fsync_path(directory)
            _remove_tree(tmp)
        elif not exists:
            os.rename(tmp, directory)
            fsync_path(parent)
        else:
            if _exchange(tmp, directory):
                old = tmp  # now holds the old artifact
            else:
                old = tempfile.mkdtemp(prefix=f".{name}.old-{os.getpid()}-", dir=parent)
                os.rmdir(old)
                os.rename(directory, old)
                try:
                    os.rename(tmp, directory)
                except OSError:
                    os.rename(old, directory)
                    raise
            tmp = None
            fsync_path(parent)
            _carry_entries(old, directory, artifact_files)
            fsync_path(directory)
            _remove_tree(old)
    except BaseException as err:
        if tmp is not None:
            _remove_tree(tmp)
        if isinstance(err, OSError):
            as_it_was = "" if in_place else "; the directory is as it was"
            raise ArtifactError(f"{shown}: cannot write {what} ({_reason(err)}){as_it_was}") from None
        raise


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    text = str(err)
    # safetensors: 'Error while serializing: I/O error: No space left on device (os error 28)'
    return text.rsplit("error: ", 1)[-1].split(" (os error")[0]


def pause_for_tests() -> None:
    """Sleep ``RASP_TEST_WRITE_PAUSE`` seconds when it is set (tests only)."""
    pause = os.environ.get(_PAUSE_ENV)
    if pause:
        import time

        time.sleep(float(pause))


def write_file(path: str | os.PathLike, write: Callable[[str], None],
               example_name: str = "NAME.safetensors") -> None:
    """Write one artifact file atomically: ``write(tmp)`` writes a temporary file beside ``path``
    (``.NAME.tmp-PID-XXXX``), which gets the umask's mode, is fsynced and renamed over ``path`` (a
    link there is replaced, not followed).  ArtifactError where ``path`` is a directory, OSError on
    other failures; ``path`` untouched.  ``example_name`` is the file name the hint suggests."""
    shown = os.fspath(path)
    path = os.path.abspath(shown)
    if os.path.isdir(path) and not os.path.islink(path):  # the rename would fail with IsADirectoryError
        raise ArtifactError(f"{shown} is a directory, not a file",
                            hint=f"give the file's name, e.g. {os.path.join(shown, example_name)}")
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.tmp-{os.getpid()}-", dir=parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, file_mode())
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_path(parent)
    # files a killed writer left beside it
    for entry in os.listdir(parent):
        m = _LEFTOVER.match(entry)
        p = os.path.join(parent, entry)
        stale = m is not None and m["name"] == name and not process_alive(int(m["pid"]))
        if stale and os.path.isfile(p) and not os.path.islink(p):
            try:
                os.unlink(p)
            except OSError:
                pass


def only_artifact_files(directory: str | os.PathLike, artifact_files: Iterable[str]) -> bool:
    """Whether every entry of ``directory`` is one of ``artifact_files`` (a regular file, not a
    link) or a stale safetensors temporary: what a crashed or corrupted artifact leaves, which a
    new write may replace without ``--force``."""
    names = set(artifact_files)
    try:
        entries = os.listdir(directory)
    except OSError:
        return False
    for entry in entries:
        path = os.path.join(directory, entry)
        if os.path.islink(path) or not os.path.isfile(path):
            return False
        if entry not in names and not _SAFETENSORS_TEMP.match(entry):
            return False
    return True


# a config file read to tell whether a directory holds an artifact of ours is read only up to this
CONFIG_PEEK_BYTES = 16 << 20


def holds_format(directory: str | os.PathLike, config_file: str, fmt: str) -> bool:
    """Whether ``directory/config_file`` is a regular file (not a link) of at most
    ``CONFIG_PEEK_BYTES`` holding a JSON object whose ``format`` is ``fmt``."""
    import json

    path = os.path.join(directory, config_file)
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    try:
        if os.path.getsize(path) > CONFIG_PEEK_BYTES:
            return False
        with open(path, "rb") as fh:
            value = json.loads(fh.read())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(value, dict) and value.get("format") == fmt
