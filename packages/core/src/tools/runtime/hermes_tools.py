# hermes_tools' runtime: the client of the supervisor's tool channel. hermes-sandbox generates the
# module for each run: its docstring, then this file as it is, then __all__ and one function per
# tool, each calling _hermes_call_with (packages/core/src/tools/stubs.ts). Every builtin is reached
# through _hermes_builtins, because a tool may be called open, filter or OSError and its function
# then shadows that builtin here.
import builtins as _hermes_builtins
import os as _hermes_os

# The C modules under socket and json: importing socket.py and json would cost every run that
# imports this module ~12 ms of CPU (enum, re); the calls below need neither. Other Pythons
# (PyPy) fall back to the modules.
try:
    import _socket as _hermes_socket
except ImportError:
    import socket as _hermes_socket
try:
    import _json as _hermes_cjson
    _hermes_cjson.make_encoder, _hermes_cjson.make_scanner, _hermes_cjson.encode_basestring
except (ImportError, AttributeError):
    _hermes_cjson = None


def _hermes_not_json(value):
    raise _hermes_builtins.TypeError("Object of type " + _hermes_builtins.type(value).__name__ + " is not JSON serializable")


def _hermes_encode(args, ascii):
    """json.dumps(args, ensure_ascii=ascii, allow_nan=False), through the C encoder json itself uses."""
    if _hermes_cjson is not None:
        try:
            encoder = _hermes_cjson.make_encoder(
                {}, _hermes_not_json, _hermes_cjson.encode_basestring_ascii if ascii else _hermes_cjson.encode_basestring,
                None, ": ", ", ", False, False, False)
        except _hermes_builtins.TypeError:
            encoder = None
        if encoder is not None:
            return "".join(encoder(args, 0))
    import json as _hermes_json
    return _hermes_json.dumps(args, ensure_ascii=ascii, allow_nan=False)


class _hermes_JsonContext:
    """What json's C scanner reads of a decoder: json.loads' defaults."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = _hermes_builtins.float
    parse_int = _hermes_builtins.int
    parse_constant = {"-Infinity": _hermes_builtins.float("-inf"), "Infinity": _hermes_builtins.float("inf"), "NaN": _hermes_builtins.float("nan")}.__getitem__
    memo = {}


_hermes_scan = None


def _hermes_decode(text):
    """json.loads(text); anything the C scanner does not take whole goes to json itself (its errors)."""
    global _hermes_scan
    if _hermes_cjson is not None:
        try:
            if _hermes_scan is None:
                _hermes_scan = _hermes_cjson.make_scanner(_hermes_JsonContext())
            value, end = _hermes_scan(text, 0)
            if end == _hermes_builtins.len(text):
                return value
        except (_hermes_builtins.StopIteration, _hermes_builtins.TypeError, _hermes_builtins.ValueError):
            pass
    import json as _hermes_json
    return _hermes_json.loads(text)


class ToolError(_hermes_builtins.Exception):
    """A tool call failed: the tool raised (the message is its message), timed out, returned too
    much, or the run is ending."""


class ToolRefused(ToolError):
    """The host refused a call without running the tool: unknown tool, invalid arguments, no calls
    left in this run's budget, or arguments too large."""


def call_tool(name, args=None):
    """Call the host tool named name with args (a dict, sent as a JSON object; None for none) and
    return its result (parsed JSON). Raises ToolError if the tool fails and ToolRefused if the host
    refuses the call. A call is never retried."""
    if not _hermes_builtins.isinstance(name, _hermes_builtins.str):
        raise _hermes_builtins.TypeError("call_tool: the name must be a str, not " + _hermes_builtins.type(name).__name__)
    if args is None:
        args = {}
    elif not _hermes_builtins.isinstance(args, _hermes_builtins.dict):
        raise _hermes_builtins.TypeError("call_tool: args must be a dict, not " + _hermes_builtins.type(args).__name__)
    return _hermes_call(name, args)


class _hermes_NotGiven:
    """The default of an argument not given: it is left out of the call."""

    __slots__ = ()

    def __repr__(self):
        return "<not given>"


_hermes_not_given = _hermes_NotGiven()


def _hermes_call_with(name, given, more):
    args = {}
    for key, value in given:
        if value is not _hermes_not_given:
            args[key] = value
    args.update(more)
    return _hermes_call(name, args)


def _hermes_call(name, args):
    if "\n" in name:
        raise _hermes_builtins.ValueError("a tool name has no newline: " + _hermes_builtins.repr(name))
    path = _hermes_os.environ.get("HERMES_TOOLS_SOCKET")
    if not path:
        raise ToolError("this run has no tool channel (no tools were given to it)")
    try:
        body = _hermes_encode(args, False).encode("utf-8")
    except _hermes_builtins.UnicodeEncodeError:
        # A lone surrogate (say from a surrogateescape'd file name) has no UTF-8 form; escaped it does.
        body = _hermes_encode(args, True).encode("ascii")
    request = name.encode("utf-8") + b"\n" + body
    chunks = []
    sock = _hermes_socket.socket(_hermes_socket.AF_UNIX, _hermes_socket.SOCK_STREAM)
    try:
        # The host times calls out; a default timeout the program set must not cut one short.
        sock.settimeout(None)
        try:
            sock.connect(path)
        except _hermes_builtins.OSError as error:
            raise ToolError("cannot reach the tool channel: " + (error.strerror or _hermes_builtins.str(error))) from None
        try:
            sock.sendall(request)
            sock.shutdown(_hermes_socket.SHUT_WR)
        except _hermes_builtins.OSError:
            # The channel stopped reading (arguments too large, or the run is ending); its answer,
            # if there is one, is still to be read.
            pass
        while True:
            try:
                chunk = sock.recv(65536)
            except _hermes_builtins.OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        sock.close()
    reply = b"".join(chunks)
    if not reply:
        raise ToolError("the tool channel closed before the call was answered (the run is ending)")
    status, payload = reply[:1], reply[1:]
    if status == b"0":
        try:
            return _hermes_decode(payload.decode("utf-8"))
        except _hermes_builtins.ValueError as error:
            raise ToolError("the tool channel sent a result that is not JSON: " + _hermes_builtins.str(error)) from None
    message = payload.decode("utf-8", "replace")
    if status == b"1":
        raise ToolError(message)
    if status == b"2":
        raise ToolRefused(message)
    raise ToolError("the tool channel sent an unknown status " + _hermes_builtins.repr(status))
