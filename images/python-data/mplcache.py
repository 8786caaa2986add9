"""Seeds matplotlib's font cache in a fresh sandbox (imported at start-up by hermes-sandbox-mplcache.pth).

The root filesystem is read-only, so matplotlib's config and cache directory is MPLCONFIGDIR, on
the /tmp tmpfs, which starts empty in every sandbox: without this, each run's first
`import matplotlib.pyplot` scans the fonts again (~0.2 s). The image's build wrote the font list
once (FONTLIST_DIR); this copies it into the empty cache directory. It costs a program that never
imports matplotlib one stat(). Only the image's own MPLCONFIGDIR is seeded: a directory the user
chose is left as they made it. Any failure leaves matplotlib to build the cache itself, as usual.
"""
import os

IMAGE_MPLCONFIGDIR = "/tmp/.cache/matplotlib"
FONTLIST_DIR = "/usr/local/share/hermes-sandbox/matplotlib"


def _seed():
    if os.environ.get("MPLCONFIGDIR") != IMAGE_MPLCONFIGDIR:
        return
    try:
        names = [n for n in os.listdir(FONTLIST_DIR) if n.startswith("fontlist-") and n.endswith(".json")]
        if all(os.path.exists(os.path.join(IMAGE_MPLCONFIGDIR, n)) for n in names):
            return
        os.makedirs(IMAGE_MPLCONFIGDIR, mode=0o700, exist_ok=True)
        for name in names:
            with open(os.path.join(FONTLIST_DIR, name), "rb") as f:
                data = f.read()
            # Written aside and renamed: two processes starting at once never see half a file.
            tmp = os.path.join(IMAGE_MPLCONFIGDIR, ".%s.%d" % (name, os.getpid()))
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(IMAGE_MPLCONFIGDIR, name))
    except OSError:
        pass


_seed()
