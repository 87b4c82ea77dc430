"""One user-facing error path: a CagError becomes one line on stderr and exit code 1.

Set CAG_DEBUG=1 to see the traceback instead.
"""

import functools
import os
import sys

import typer

from cag.errors import CagError


def handle_errors(command):
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CagError as exc:
            if os.environ.get("CAG_DEBUG") == "1":
                raise
            typer.echo(f"Error: {exc}", err=True)
            sys.exit(1)
    return wrapper
