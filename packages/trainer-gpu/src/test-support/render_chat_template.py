"""Render a chat template the way Python transformers' apply_chat_template does (independent reference).

Reads JSON {template, context} on stdin, prints the rendered text. Environment as in transformers:
sandboxed Jinja2 with trim_blocks/lstrip_blocks and loopcontrols, `tojson` = json.dumps(ensure_ascii=False),
`raise_exception` and `strftime_now` globals.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def main():
    request = json.loads(sys.stdin.read())
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    outputs = [env.from_string(request["template"]).render(**ctx) for ctx in request["contexts"]]
    sys.stdout.write(json.dumps(outputs, ensure_ascii=False))


if __name__ == "__main__":
    main()
