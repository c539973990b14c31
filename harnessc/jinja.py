"""Jinja (and MarkupSafe, its escaping), met only here: the prompt templates' sandbox
(compiler/sandbox.py) builds on these classes, and the run report renders its HTML page with
them (runreport/html.py). Loading this module loads Jinja: both import it when a template is
first rendered, so lint, a run's start and a Markdown report never pay for it.
"""

from __future__ import annotations

from jinja2 import (
    BaseLoader,
    ChoiceLoader,
    Environment,
    PackageLoader,
    StrictUndefined,
    Template,
    TemplateError,
    TemplateNotFound,
    TemplateSyntaxError,
    UndefinedError,
    nodes,
)
from jinja2.compiler import CodeGenerator
from jinja2.exceptions import SecurityError
from jinja2.loaders import split_template_path
from jinja2.runtime import LoopContext, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import missing
from markupsafe import Markup

__all__ = ["BaseLoader", "ChoiceLoader", "CodeGenerator", "Environment", "ImmutableSandboxedEnvironment",
           "LoopContext", "Macro", "Markup", "PackageLoader", "SecurityError", "StrictUndefined", "Template",
           "TemplateError", "TemplateNotFound", "TemplateSyntaxError", "UndefinedError", "missing", "nodes",
           "split_template_path"]
