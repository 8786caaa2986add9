#!/usr/bin/env python3
"""hermes-sandbox in-container runner, protocol version 1 (Python 3.9+, stdlib only).

The SDK writes to the container's attached stdin:

    HERMES/1 <json-header>\\n
    <code bytes><file 1 bytes><file 2 bytes>...<the program's own stdin, untouched>

header: {"language": "python"|"javascript"|"bash", "code": <bytes>,
         "files": [["relative/path", <bytes>], ...]}          ("files" may be omitted)

The header is read one byte at a time with os.read(0, 1) and the payload with exact-length
os.read() calls, so not one byte of the program's stdin is consumed. Files go under
$HERMES_WORKSPACE (default /workspace), the code to $HERMES_CODE_DIR/main.<ext> (default
/tmp/.hermes, dir 0700, file 0600); then the interpreter replaces this process (execvp)
with cwd = workspace and fd 0 still positioned at the program's stdin:
    python3 main.py (PYTHONUNBUFFERED=1) | node main.js | bash main.sh

Exit status: the program's own; 126 = protocol or setup error (one line on stderr starting
with "hermes-runner: "); 127 = the interpreter is not installed in this image.
"""
import errno
import json
import os
import signal
import stat
import sys

PROTOCOL_ERROR = 126
INTERPRETER_MISSING = 127
PREFIX = b"HERMES/1 "
MAX_HEADER_BYTES = 1 << 20
MAX_LENGTH = (1 << 53) - 1  # same bound as the JavaScript runner (Number.MAX_SAFE_INTEGER)
CHUNK = 1 << 16
LANGUAGES = {
    "python": ("main.py", "python3"),
    "javascript": ("main.js", "node"),
    "bash": ("main.sh", "bash"),
}


class RunnerError(Exception):
    def __init__(self, message, code=PROTOCOL_ERROR):
        Exception.__init__(self, message)
        self.code = code


def fail(message, code=PROTOCOL_ERROR):
    try:
        os.write(2, ("hermes-runner: " + message.replace("\n", " ") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass
    os._exit(code)


def read_header():
    line = bytearray()
    while True:
        b = os.read(0, 1)
        if not b:
            raise RunnerError("stdin ended before the end of the header line (%d bytes read)" % len(line))
        if b == b"\n":
            break
        line += b
        if len(line) <= len(PREFIX) and bytes(line) != PREFIX[: len(line)]:
            raise RunnerError("stdin does not start with 'HERMES/1 ' (protocol version 1 header expected)")
        if len(line) > MAX_HEADER_BYTES:
            raise RunnerError("header line longer than %d bytes" % MAX_HEADER_BYTES)
    if len(line) < len(PREFIX):
        raise RunnerError("stdin does not start with 'HERMES/1 ' (protocol version 1 header expected)")
    try:
        header = json.loads(bytes(line[len(PREFIX):]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise RunnerError("header is not valid JSON: %s" % e)
    if not isinstance(header, dict):
        raise RunnerError("header must be a JSON object")
    return header


def as_length(value, what):
    # Integral numbers only; 3.0 is accepted because JSON (and the JavaScript runner) cannot tell it from 3.
    if isinstance(value, bool):
        raise RunnerError("%s must be a non-negative integer" % what)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value < 0 or value > MAX_LENGTH:
        raise RunnerError("%s must be a non-negative integer" % what)
    return value


def split_relative_path(path):
    """'a/b/c.txt' -> ['a', 'b', 'c.txt']; rejects absolute paths, '..' segments and NUL bytes."""
    if not isinstance(path, str) or path == "":
        raise RunnerError("file path must be a non-empty string")
    if "\x00" in path:
        raise RunnerError("file path contains a NUL byte: %r" % path)
    if path.startswith("/"):
        raise RunnerError("file path must be relative to the workspace: %r" % path)
    segments = path.split("/")
    if ".." in segments:
        raise RunnerError("file path must not contain '..': %r" % path)
    parts = [s for s in segments if s not in ("", ".")]
    if not parts:
        raise RunnerError("file path names no file: %r" % path)
    return parts


def parse_header(header):
    language = header.get("language")
    if language not in LANGUAGES:
        raise RunnerError("unknown language %r (expected one of: %s)" % (language, ", ".join(sorted(LANGUAGES))))
    code = as_length(header.get("code"), "code")
    files = header.get("files", [])
    if not isinstance(files, list):
        raise RunnerError("files must be a list of [path, length] pairs")
    parsed = []
    for entry in files:
        if not isinstance(entry, list) or len(entry) != 2:
            raise RunnerError("files must be a list of [path, length] pairs")
        parsed.append((entry[0], split_relative_path(entry[0]), as_length(entry[1], "length of %r" % (entry[0],))))
    return language, code, parsed, parse_report(header.get("report"))


# Completion report (optional header key "report": a hex nonce). When asked, the runner writes
# b"\x1eHERMES-DONE <nonce> <exit code>\n" on stdout AND stderr once the program has ended and its
# output is flushed, so the SDK can return without waiting for the engine to report the exit.
# The nonce only identifies this run's marker; the container serves exactly one execution, so a
# program that prints it can only end its own run early, never forge another's result.
def parse_report(report):
    if report is None:
        return None
    if not isinstance(report, str) or not (16 <= len(report) <= 64) or any(c not in "0123456789abcdef" for c in report):
        raise RunnerError("report must be a hex nonce of 16 to 64 characters")
    return report


def write_markers(report, code):
    marker = ("\x1eHERMES-DONE %s %d\n" % (report, code)).encode("ascii")
    for fd in (1, 2):
        try:
            write_all(fd, marker)
        except OSError:
            pass


def exit_code_of(exc):
    # As the interpreter does for an uncaught SystemExit.
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def run_python_here(main_path, report):
    """Run the program in this interpreter, as `python3 main.py` would, then report its end.

    Saves starting a second interpreter (~20 ms). Differences from a fresh `python3 main.py`:
    none visible to ordinary programs (sys.argv, __main__, __file__, sys.path[0], unbuffered
    output and tracebacks are the same); the runner's own modules are already imported.
    """
    import atexit
    import io
    import runpy
    import threading
    import traceback

    sys.argv = [main_path]
    sys.path[0] = os.path.dirname(main_path)
    class FlushingWriter(io.BufferedWriter):
        """Each write is flushed at once, as with PYTHONUNBUFFERED=1, but completed: a raw FileIO
        (what -u gives) returns short writes, which print() silently drops, and gVisor's host
        pipes accept 64 KiB per write(2) (a 1 MiB print() lost the rest)."""

        def write(self, b):
            n = io.BufferedWriter.write(self, b)
            self.flush()
            return n

    sys.stdout = io.TextIOWrapper(FlushingWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="strict", write_through=True)
    sys.stderr = io.TextIOWrapper(FlushingWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8", errors="backslashreplace", write_through=True)
    os.environ["PYTHONUNBUFFERED"] = "1"  # for the program's own child interpreters, as before
    # A fresh interpreter ignores SIGPIPE and SIGXFSZ (they surface as exceptions); the runner had reset them.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    code = 0
    try:
        runpy.run_path(main_path, run_name="__main__")
    except SystemExit as e:
        code = exit_code_of(e)
    except BaseException as e:  # noqa: BLE001 - an uncaught exception, printed as the interpreter would
        tb = e.__traceback__
        # Hide the runner's and runpy's frames: the traceback starts in the program.
        while tb is not None and tb.tb_frame.f_code.co_filename != main_path:
            tb = tb.tb_next
        try:
            traceback.print_exception(type(e), e, tb)
        except Exception:
            pass
        code = 130 if isinstance(e, KeyboardInterrupt) else 1
    # The interpreter's shutdown: join non-daemon threads, then run atexit handlers.
    try:
        threading._shutdown()
    except Exception:
        pass
    try:
        atexit._run_exitfuncs()
    except Exception:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    write_markers(report, code)
    os._exit(code)


def run_child(interpreter, main_path, env, report):
    import subprocess
    try:
        rc = subprocess.call([interpreter, main_path], env=env)
    except FileNotFoundError:
        fail("%s is not installed in this image" % interpreter, INTERPRETER_MISSING)
    code = 128 - rc if rc < 0 else rc
    write_markers(report, code)
    os._exit(code)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def copy_exact(length, out_fd, what):
    remaining = length
    while remaining > 0:
        chunk = os.read(0, min(remaining, CHUNK))
        if not chunk:
            raise RunnerError("stdin ended after %d of %d bytes of %s" % (length - remaining, length, what))
        write_all(out_fd, chunk)
        remaining -= len(chunk)


def open_in_workspace(workspace_fd, display, parts):
    """Create parents and open parts[-1] for writing, never following a symlink at any level."""
    dir_fd = os.dup(workspace_fd)
    try:
        for name in parts[:-1]:
            try:
                os.mkdir(name, 0o755, dir_fd=dir_fd)
            except FileExistsError:
                pass
            not_a_dir = RunnerError("file path %r: %r is a symlink or not a directory" % (display, name))
            # lstat first, then check the opened directory is that very inode: gVisor (runsc
            # 2022-12) follows a symlink despite O_NOFOLLOW when O_DIRECTORY is also given.
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise not_a_dir
            try:
                next_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise not_a_dir
                raise
            opened = os.fstat(next_fd)
            if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                os.close(next_fd)
                raise not_a_dir
            os.close(dir_fd)
            dir_fd = next_fd
        try:
            return os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise RunnerError("file path %r is a symlink" % (display,))
            raise
    finally:
        os.close(dir_fd)


def prepare_code_dir(code_dir):
    parent = os.path.dirname(code_dir.rstrip("/")) or "/"
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    try:
        os.mkdir(code_dir, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(code_dir)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise RunnerError("%s is not a directory owned by this user" % code_dir)
    os.chmod(code_dir, 0o700)


def main():
    workspace = os.environ.get("HERMES_WORKSPACE") or "/workspace"
    code_dir = os.environ.get("HERMES_CODE_DIR") or "/tmp/.hermes"
    try:
        language, code_length, files, report = parse_header(read_header())
        file_name, interpreter = LANGUAGES[language]
        prepare_code_dir(code_dir)
        main_path = os.path.join(code_dir, file_name)
        fd = os.open(main_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            copy_exact(code_length, fd, "code")
        finally:
            os.close(fd)
        if files:
            workspace_fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
            try:
                for display, parts, length in files:
                    fd = open_in_workspace(workspace_fd, display, parts)
                    try:
                        copy_exact(length, fd, "file %r" % (display,))
                    finally:
                        os.close(fd)
            finally:
                os.close(workspace_fd)
        os.chdir(workspace)
    except RunnerError as e:
        fail(str(e), e.code)
    except OSError as e:
        fail("setup failed: %s" % e)

    env = dict(os.environ)
    if language == "python":
        env["PYTHONUNBUFFERED"] = "1"
    # Python ignores SIGPIPE and SIGXFSZ; ignored dispositions survive exec, so restore the defaults
    # (otherwise `yes | head -1` in a bash program would report EPIPE instead of dying quietly).
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if report is not None:
        if language == "python":
            run_python_here(main_path, report)
        run_child(interpreter, main_path, env, report)
    try:
        os.execvpe(interpreter, [interpreter, main_path], env)
    except FileNotFoundError:
        fail("%s is not installed in this image (language %s)" % (interpreter, language), INTERPRETER_MISSING)
    except OSError as e:
        fail("cannot run %s: %s" % (interpreter, e))


if __name__ == "__main__":
    main()
