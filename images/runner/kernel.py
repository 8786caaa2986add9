# A session's Python kernel: the driver that hermes-run --kernel python forks as `python3 -u -c`
# (images/runner/kernel.c; docs/design/kernel.md §4 and §8). Embedded in the supervisor as
# images/runner/kernel.h by `pnpm codegen` (scripts/codegen.ts), without these leading comment
# lines: edit this file, then run `pnpm codegen`.
#
# fd 3 is the control socket (SOCK_SEQPACKET, one message each): this sends "ready[ <failed
# preload>...]" (or "error <why>" and exits) once the shell is up, then for each "cell <count>
# <module 0|1>" message, which carries four descriptors (code to read to EOF, stdout, stderr,
# records), runs the cell with fd 1/2 on the cell's pipes and answers "done ok|error" once it has
# pointed fd 1/2 back at its idle pipes and closed the cell's; "ping <n>" gets "pong <n>". Records:
# <kind R|D|X><4-byte big-endian length><JSON>. None of this is trusted by the supervisor: a cell
# can rewrite all of it (SECURITY.md, Kernels). argv[1:]: modules to import once the shell is up.
import sys
# The working directory is first on the path ('' for `python3 -c`): a file there named like a module
# the driver imports (json.py, signal.py, struct.py, ...) would run instead, and the kernel would not
# start. Off the path while the driver sets up; back (for the cells' own imports) before the preload.
cwd_on_path = sys.path[:1] == ['']
if cwd_on_path:
    del sys.path[0]
import os, socket, signal, struct, json, base64
ctl = socket.socket(fileno=3)
send = lambda text: ctl.send(text.encode('utf-8', 'replace'))
idle_out, idle_err = os.dup(1), os.dup(2)
for fd in (idle_out, idle_err):
    os.set_inheritable(fd, False)
try:
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: calls cannot read this process
except Exception:
    pass
code_dir = os.environ.get('HERMES_CODE_DIR') or '/tmp/.hermes'
try:
    import tempfile, importlib, importlib.util
    os.environ['IPYTHONDIR'] = tempfile.mkdtemp(prefix='ipython-', dir=code_dir)
    # Figures as displays without the user choosing a backend (over the images' Agg), when there is
    # the inline backend; its children inherit it too.
    if importlib.util.find_spec('matplotlib_inline') is not None:
        os.environ['MPLBACKEND'] = 'module://matplotlib_inline.backend_inline'
    from traitlets.config import Config
    # IPython's completer imports jedi only to offer completions, which nothing asks a kernel for:
    # a blocked import (its ImportError is handled there) saves ~75 ms of every kernel's start. A
    # cell's own `import jedi` works: the block is lifted at once.
    jedi_blocked = 'jedi' not in sys.modules
    if jedi_blocked:
        sys.modules['jedi'] = None
    try:
        from IPython.core.interactiveshell import InteractiveShell
    finally:
        if jedi_blocked and sys.modules.get('jedi', 0) is None:
            del sys.modules['jedi']
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.displayhook import DisplayHook
except Exception as e:
    send('error no IPython: %s: %s' % (type(e).__name__, e))
    os._exit(1)

rec_fd = -1


def clean(o, depth=0):
    # Strict JSON, whatever a formatter or a cell returned: binary (image/png from matplotlib, bytes
    # from a _repr_png_) as base64, as Jupyter; NaN and infinities, and anything JSON has no type
    # for, as their repr; keys as strings.
    if isinstance(o, str) or o is None or isinstance(o, (bool, int)):
        return o
    if isinstance(o, float):
        return o if o == o and o not in (float('inf'), float('-inf')) else repr(o)
    if isinstance(o, (bytes, bytearray)):
        return base64.b64encode(o).decode('ascii')
    if depth < 100 and isinstance(o, dict):
        return {str(k): clean(v, depth + 1) for k, v in o.items()}
    if depth < 100 and isinstance(o, (list, tuple)):
        return [clean(v, depth + 1) for v in o]
    return repr(o)


def record(kind, obj):
    if rec_fd < 0:
        return
    data = json.dumps(clean(obj), allow_nan=False).encode('ascii')
    buf = memoryview(kind + struct.pack('>I', len(data)) + data)
    while len(buf):
        buf = buf[os.write(rec_fd, buf):]


class Publisher(DisplayPublisher):
    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kw):
        record(b'D', {'data': data or {}, 'metadata': metadata or {}})

    def clear_output(self, wait=False):
        pass


class Hook(DisplayHook):
    def write_output_prompt(self):
        pass

    def write_format_data(self, format_dict, md_dict=None):
        record(b'R', {'data': format_dict or {}, 'metadata': md_dict or {}})

    def finish_displayhook(self):
        pass


InteractiveShell.display_pub_class = Publisher
InteractiveShell.displayhook_class = Hook
config = Config()
config.HistoryManager.hist_file = ':memory:'
shell = InteractiveShell.instance(config=config, colors='NoColor')
shell.InteractiveTB.set_mode('Context')


def show_traceback(etype, evalue, stb):
    record(b'X', {'ename': getattr(etype, '__name__', str(etype)), 'evalue': str(evalue), 'traceback': list(stb)})


shell._showtraceback = show_traceback

# SIGINT (the supervisor's interrupt, to the whole process group) raises only inside a cell: at idle
# it must not end the driver. In a cell the handler is Python's own default_int_handler, as ipykernel
# sets it for each request: a C function, so the KeyboardInterrupt's traceback holds the cell's
# frames alone (a handler written here would add one of the driver's). A handler the cell installs
# lasts until the cell's end, as in ipykernel.


def at_idle(signum, frame):
    pass


signal.signal(signal.SIGINT, at_idle)
if cwd_on_path:
    sys.path.insert(0, '')
failed = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException:
        failed.append(name)
send(' '.join(['ready'] + failed))

while True:
    try:
        msg, fds, _, _ = socket.recv_fds(ctl, 4096, 4)
    except KeyboardInterrupt:
        continue
    except OSError:
        os._exit(0)
    if not msg and not fds:
        os._exit(0)  # the supervisor is gone
    words = msg.decode('ascii', 'replace').split()
    if words[:1] == ['ping'] and len(words) == 2:
        send('pong ' + words[1])
        continue
    if words[:1] != ['cell'] or len(fds) != 4 or len(words) != 3:
        for fd in fds:
            os.close(fd)
        continue
    code_fd, out_fd, err_fd, rec_fd = fds
    ok = False
    try:
        chunks = []
        while True:
            b = os.read(code_fd, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(code_fd)
        code = b''.join(chunks).decode('utf-8', 'replace')
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(out_fd)
        os.close(err_fd)
        if words[2] == '1':
            sys.modules.pop('hermes_tools', None)  # this cell's tool set came with it
        shell.execution_count = int(words[1])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            result = shell.run_cell(code, store_history=True)
        finally:
            signal.signal(signal.SIGINT, at_idle)
        ok = result.success
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, at_idle)
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except BaseException:
                pass
        os.dup2(idle_out, 1)
        os.dup2(idle_err, 2)
        os.close(rec_fd)
        rec_fd = -1
        send('done ' + ('ok' if ok else 'error'))
