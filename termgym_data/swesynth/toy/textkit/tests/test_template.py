import pytest

from textkit.template import LoopInfo, Template, TemplateRenderError, TemplateSyntaxError, render, safe


def test_plain_text_passthrough():
    assert render("no tags here") == "no tags here"


def test_variables_and_keyword_override():
    assert render("{{ a }}-{{ b }}", {"a": 1, "b": 2}, b=3) == "1-3"


def test_none_renders_as_nothing():
    assert render("[{{ x }}]", x=None) == "[]"


def test_autoescape():
    t = Template("{{ v }}|{{ v | safe }}", autoescape=True)
    assert t.render(v="<i>") == "&lt;i&gt;|<i>"
    assert render("{{ v }}", v="<i>") == "<i>"
    assert Template("{{ v }}", autoescape=True).render(v=safe("<i>")) == "<i>"


def test_if_elif_else():
    t = Template("{% if n > 10 %}big{% elif n > 5 %}medium{% else %}small{% endif %}")
    assert [t.render(n=n) for n in (11, 10, 6, 5, 0)] == ["big", "medium", "medium", "small", "small"]


def test_if_without_else():
    t = Template("a{% if flag %}b{% endif %}c")
    assert t.render(flag=True) == "abc"
    assert t.render(flag=False) == "ac"


def test_nested_if():
    t = Template("{% if a %}{% if b %}AB{% else %}A{% endif %}{% endif %}")
    assert t.render(a=1, b=1) == "AB"
    assert t.render(a=1, b=0) == "A"
    assert t.render(a=0, b=1) == ""


def test_for_loop_and_loop_variable():
    t = Template("{% for x in xs %}{{ loop.index }}:{{ x }}{% if not loop.last %}, {% endif %}{% endfor %}")
    assert t.render(xs=["a", "b", "c"]) == "1:a, 2:b, 3:c"


def test_for_else_on_empty():
    t = Template("{% for x in xs %}{{ x }}{% else %}none{% endfor %}")
    assert t.render(xs=[]) == "none"
    assert t.render(xs=None) == "none"
    assert t.render(xs=[1]) == "1"


def test_for_unpacking_pairs():
    t = Template("{% for k, v in pairs %}{{ k }}={{ v }};{% endfor %}")
    assert t.render(pairs=[("a", 1), ("b", 2)]) == "a=1;b=2;"


def test_for_unpack_mismatch():
    t = Template("{% for a, b in xs %}{% endfor %}")
    with pytest.raises(TemplateRenderError, match="cannot unpack 3 values into 2 names"):
        t.render(xs=[(1, 2, 3)])


def test_loop_variable_does_not_leak():
    t = Template("{% for x in xs %}{{ x }}{% endfor %}{{ x }}")
    assert t.render(xs=[1, 2], x="outer") == "12outer"


def test_nested_loops_have_own_loop_info():
    t = Template("{% for r in rows %}{% for c in r %}{{ loop.index }}{% endfor %}|{{ loop.index }} {% endfor %}")
    assert t.render(rows=[[7, 8], [9]]) == "12|1 1|2 "


def test_loop_info_properties():
    info = LoopInfo(0, 3)
    assert (info.index, info.revindex, info.first, info.last) == (1, 3, True, False)
    last = LoopInfo(2, 3)
    assert (last.index, last.revindex, last.first, last.last) == (3, 1, False, True)


def test_loop_cycle():
    t = Template("{% for x in xs %}{{ loop.cycle('odd', 'even') }} {% endfor %}")
    assert t.render(xs=[1, 2, 3]) == "odd even odd "


def test_set_tag():
    assert render("{% set total = a + b %}{{ total * 2 }}", a=1, b=2) == "6"


def test_comments_are_dropped():
    assert render("a{# hidden {{ x }} #}b") == "ab"


def test_whitespace_trimming():
    source = "<ul>\n  {%- for x in xs %}\n  <li>{{ x }}</li>\n  {%- endfor %}\n</ul>"
    assert render(source, xs=[1, 2]) == "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>"


def test_trim_after_tag():
    assert render("{{ a -}}   \n  b", a="x") == "xb"


def test_custom_filters():
    t = Template("{{ n | double }}", filters={"double": lambda v: v * 2})
    assert t.render(n=21) == "42"


@pytest.mark.parametrize(
    "source, message, line",
    [
        ("{% if x %}open", "never closed with endif", 1),
        ("a\n{% for x in y %}", "never closed with endfor", 2),
        ("{% endif %}", "unexpected tag 'endif'", 1),
        ("\n\n{% frobnicate %}", "unknown tag 'frobnicate'", 3),
        ("{{ }}", "empty expression", 1),
        ("x\n{{ 1 + }}", "end of input", 2),
        ("{% for x y %}{% endfor %}", "malformed for", 1),
        ("{% set = 3 %}", "malformed set", 1),
        ("{% if a %}{% else %}", "never closed with endif", 1),
    ],
)
def test_syntax_errors_name_the_line(source, message, line):
    with pytest.raises(TemplateSyntaxError, match=message) as info:
        Template(source)
    assert info.value.line == line


def test_render_error_names_line_and_expression():
    with pytest.raises(TemplateRenderError, match=r"line 2: undefined name 'who' in \{\{ who \}\}"):
        render("hi\n{{ who }}")
