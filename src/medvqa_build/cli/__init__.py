"""``medvqa-build``: thin commands over :mod:`medvqa_build.api`, one module per group
(:mod:`.build`, :mod:`.publish`, :mod:`.score`, :mod:`.review`, :mod:`.diff`), each
registering its own parsers.

User mistakes and damaged states (a corrupt build, a full disk: :mod:`.failures`) print one line
(what, where, how to fix) and exit 2; validation failures exit 1. A command that fails removes
the output folder it created.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback

from ..errors import MedvqaError
from . import build, diff, failures, publish, review, score


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="medvqa-build",
        description="Build validated, reproducible medical VQA benchmarks from raw public "
        "datasets.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log stage decisions")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    build.register(sub)
    publish.register(sub)
    score.register(sub)
    review.register(sub)
    diff.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    if not args.verbose:
        # a file pydicom cannot decode is quarantined with the reason; the traceback its
        # decoders log for it is noise
        logging.getLogger("pydicom.pixels").setLevel(logging.CRITICAL)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        # the reader went away (`medvqa-build inspect ... | head`): stop quietly, as a shell
        # tool does; stdout goes to devnull so the interpreter's own flush at exit is silent
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except MedvqaError as exc:
        return _fail(args, str(exc), exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted; finished stages are kept and reused on the next run", file=sys.stderr)
        return 130
    except Exception as exc:
        line = failures.describe(exc, args)
        if line is None:
            raise
        if args.verbose:
            traceback.print_exc()
        return _fail(args, line, 2)


def _fail(args: argparse.Namespace, line: str, code: int) -> int:
    """Print the one ``error:`` line (cut to :data:`failures.MAX_LINE`, with what was kept of
    the output folder), remove the output folder the command created, and return ``code``."""
    note = failures.undo(args) if code != 1 else None  # a failed validation keeps its report
    tail = f" ({note})" if note else ""  # still one line: scripts read the error from it
    print(f"error: {failures.one_line(line)}{tail}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
