"""textkit: markup rendering, templates, wrapping, slugs, case conversion and text statistics."""

from .escape import Markup, escape, unescape
from .markup import to_html
from .slug import slugify
from .template import Template, render

__all__ = ["Markup", "Template", "escape", "render", "slugify", "to_html", "unescape"]
__version__ = "1.2.0"
