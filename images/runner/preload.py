# The preloaded Python's first steps (hermes-run --preload python: a warm pool's sandbox starts the
# interpreter before its request arrives, and runs this as `python3 -c`). Embedded in the supervisor
# as images/runner/preload.h by `pnpm codegen` (scripts/codegen.ts), without these leading comment
# lines: edit this file, then run `pnpm codegen`.
#
# First import the modules named as arguments (`--preload python pandas matplotlib.pyplot`: the warm
# pool's `preload` option), ignoring their failures: the program's own import raises the real error.
# They run before the request, the key and the program exist, as the pool's sandbox waits.
#
# Then wait on fd 3 for "<cwd>\0<path>" (and, for a run with tools, "\0NAME=value" for the channel's
# variables, set before the program runs), then run the program as `python3 <path>` would
# (sys.argv, sys.path[0], a fresh __main__, tracebacks that start in the program, SystemExit codes,
# non-daemon threads joined and atexit handlers run, streams flushed), then leave with os._exit: the
# interpreter's module teardown, which nothing observes, is not worth its ms. It imports nothing the
# program would not (no runpy, which brings pkgutil and typing on every run; traceback only for a
# traceback): each import here is CPU every pooled sandbox spends.
import os, sys
for name in sys.argv[1:]:
    try: __import__(name)
    except BaseException: pass
d = b''
while True:
    b = os.read(3, 65536)
    if not b: break
    d += b
os.close(3)
if not d: os._exit(0)
cwd, path, *env = os.fsdecode(d).split('\0')
for kv in env:
    k, _, v = kv.partition('=')
    os.environ[k] = v
os.chdir(cwd)
sys.argv = [path]
sys.path[0] = os.path.dirname(path)
del d, b, cwd, env
code = 0
try:
    with open(path, 'rb') as f: source = f.read()
    main = type(sys)('__main__')
    main.__dict__.update(__file__=path, __builtins__=__builtins__, __spec__=None, __loader__=None, __package__='', __cached__=None)
    sys.modules['__main__'] = main
    exec(compile(source, path, 'exec'), main.__dict__)
except SystemExit as e:
    c = e.code
    if c is None: code = 0
    elif isinstance(c, int): code = c & 0xFF
    else:
        try: sys.stderr.write(str(c) + '\n')
        except Exception: pass
        code = 1
except BaseException as e:
    import traceback
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    try: traceback.print_exception(type(e), e, tb)
    except Exception: pass
    code = 130 if isinstance(e, KeyboardInterrupt) else 1
if 'threading' in sys.modules:
    try: sys.modules['threading']._shutdown()
    except Exception: pass
import atexit
try: atexit._run_exitfuncs()
except Exception: pass
for s in (sys.stdout, sys.stderr):
    try: s.flush()
    except Exception: pass
os._exit(code)
