"""``landcover view``: a region job's map in the browser (:mod:`landcover.viewer`)."""

from __future__ import annotations

import os
import sys
import threading
import webbrowser
from pathlib import Path
from typing import Annotated

import typer

from landcover.errors import DataError
from landcover.wording import counted

VIEW_EXTRA = "pip install 'landcover[view]'"


def has_display() -> bool:
    """Whether a graphical browser can open here (on Linux: an X or Wayland display).

    Without one, Python's ``webbrowser`` would start a text browser (lynx, w3m) in the
    terminal the server prints to, as on a remote machine over SSH.
    """
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def view(
    folder: Annotated[
        Path, typer.Argument(help="A region job's output folder (landcover predict --out).")
    ],
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to serve on (0: a free one).")
    ] = 8000,
    host: Annotated[
        str,
        typer.Option(
            help="Address to listen on. The default, 127.0.0.1, is this machine alone; "
            "0.0.0.0 (every interface, e.g. on a remote VM behind an SSH tunnel or a "
            "firewall) lets anyone who reaches the machine see the map."
        ),
    ] = "127.0.0.1",
    browser: Annotated[bool, typer.Option(help="Open the page in the default web browser.")] = True,
) -> None:
    """Serve a region job's map and open it in the browser (Ctrl-C stops).

    The page shows the imagery (true colour, or near-infrared false colour), the class map
    over it with its legend and an opacity control, the area of interest when the job has
    one, the per-class hectares, and on a click the class and probabilities of that pixel.
    Map tiles are rendered on demand from the COGs, so jobs of hundreds of tiles stay fast.
    """
    try:
        from landcover.viewer.job import load_job
        from landcover.viewer.server import make_server
    except ImportError as exc:  # the view extra (rio-tiler) is not installed
        raise DataError(f"landcover view needs {exc.name}: {VIEW_EXTRA}") from None

    job = load_job(folder)
    if job.signing is not None:  # its blob tiles' imagery is read as the job read them
        from landcover.storage import signing

        images = [t.image for t in job.tiles if t.image]
        signing.use(signing.choose_signing(job.signing, None, images))
    server = make_server(job, host, port)
    from landcover.storage.credentials import is_loopback  # the one loopback test

    if not is_loopback(host):
        typer.echo(
            f"warning: listening on {host}: anyone who can reach this machine on port "
            f"{server.server_address[1]} can see the map and the imagery (no sign-in)",
            err=True,
        )
    typer.echo(
        f"serving {job.folder} ({counted(len(job.tiles), 'tile')}) at {server.url} (Ctrl-C stops)"
    )
    if browser and has_display():
        threading.Thread(target=webbrowser.open, args=(server.url,), daemon=True).start()
    elif browser:
        typer.echo("no display here to open a browser on: open the address above in one")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        typer.echo("stopped")
    finally:
        server.server_close()
