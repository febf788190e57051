"""A checkpoint's chat template rendered as data, never as code (docs/security.md).

jinja2's ImmutableSandboxedEnvironment, as transformers renders chat templates: no attribute
starting with an underscore, no unsafe callables, no mutation of the values passed in, ranges of
at most 100,000. On top of it, the sizes a template can ask for in one operation (`'x' * n`,
`'%9999999s' % x`, a filter's width) are bounded by MAX_OUTPUT characters, and the whole render by
RENDER_CPU_SECONDS of CPU time (nested loops of allowed ranges); any of these, or a template
that does not parse, is a one-line ConvertError naming the file.
"""

from __future__ import annotations

import functools
import json
import re
import signal
import threading
from typing import Any

from .errors import ConvertError

MAX_OUTPUT = 1 << 20
RENDER_CPU_SECONDS = 2.0
_WIDTH = re.compile(r"%[-#0 +]*(\d+)|%[-#0 +]*\d*\.(\d+)")


class RenderBound(Exception):
    """The template asked for more than a render may spend."""


class TemplateRefused(ConvertError):
    """The template reached outside its data or past the bounds: refused whatever the family."""


def _sized(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


def _check_number(value: Any) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_OUTPUT:
        raise RenderBound(f"a count or width of {value} (more than {MAX_OUTPUT})")


def _bounded_filter(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        for v in (*args, *kwargs.values()):
            _check_number(v)
        out = fn(*args, **kwargs)
        if _sized(out) > MAX_OUTPUT:
            raise RenderBound(f"a value of {_sized(out)} characters or items (more than {MAX_OUTPUT})")
        return out

    return call


def _bounded_join(parts) -> str:
    out = "".join(map(str, parts))
    if len(out) > MAX_OUTPUT:
        raise RenderBound(f"a value of {len(out)} characters (more than {MAX_OUTPUT})")
    return out


def _environment():
    from jinja2.compiler import CodeGenerator
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedCode(CodeGenerator):
        # `a ~ b` joins through the bound instead of jinja2's str_join (a doubling loop of `~`).
        def visit_Concat(self, node, frame) -> None:
            self.write("environment.bounded_join((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        code_generator_class = BoundedCode
        intercepted_binops = frozenset(["*", "**", "%", "+"])
        bounded_join = staticmethod(_bounded_join)

        def call_binop(self, context, operator, left, right):
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int) and len(seq) * max(n, 0) > MAX_OUTPUT:
                        raise RenderBound(f"a repetition of {len(seq) * n} characters or items (more than {MAX_OUTPUT})")
            elif operator == "**":
                if isinstance(right, (int, float)) and abs(right) > 1024 or isinstance(left, (int, float)) and abs(left) > 2**64:
                    raise RenderBound(f"a power {left!r} ** {right!r} past the render's bound")
            elif operator == "%" and isinstance(left, str):
                for width, precision in _WIDTH.findall(left):
                    _check_number(int(width or precision or 0))
            elif operator == "+" and _sized(left) + _sized(right) > MAX_OUTPUT:
                raise RenderBound(f"a value of {_sized(left) + _sized(right)} characters or items (more than {MAX_OUTPUT})")
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805  jinja2's own signature
            for v in (*args, *kwargs.values()):
                _check_number(v)
            out = super().call(__context, __obj, *args, **kwargs)
            if _sized(out) > MAX_OUTPUT:
                raise RenderBound(f"a value of {_sized(out)} characters or items (more than {MAX_OUTPUT})")
            return out

    env = BoundedSandbox(keep_trailing_newline=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda v, **_: json.dumps(v, ensure_ascii=False)
    env.filters = {name: _bounded_filter(fn) for name, fn in env.filters.items()}
    return env


def _on_cpu_limit(_signum, _frame):
    raise RenderBound(f"more than {RENDER_CPU_SECONDS:g} s of CPU")


def render_template(source: str, where: str, **variables: Any) -> str:
    """Renders `source` (the chat template of the file `where`) in the bounded sandbox."""
    from jinja2.exceptions import SecurityError, TemplateError

    timed = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
    previous = signal.signal(signal.SIGPROF, _on_cpu_limit) if timed else None
    if timed:
        signal.setitimer(signal.ITIMER_PROF, RENDER_CPU_SECONDS)
    try:
        out, size = [], 0
        for piece in _environment().from_string(source).generate(**variables):
            size += len(piece)
            if size > MAX_OUTPUT:
                raise RenderBound(f"more than {MAX_OUTPUT} characters of output")
            out.append(piece)
    except SecurityError as err:
        raise TemplateRefused(f"{where}: the chat template reaches outside its data ({_line(err)}); refused: a template is data, never code") from None
    except RenderBound as err:
        raise TemplateRefused(f"{where}: the chat template ran past the render's bound ({err}); refused") from None
    except (TemplateError, RecursionError, MemoryError, OverflowError, ArithmeticError, TypeError, ValueError, LookupError, AttributeError) as err:
        raise ConvertError(f"{where}: the chat template cannot render ({type(err).__name__}: {_line(err)})") from None
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)
    return "".join(out)


def _line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 200 else text[:200] + "..."
