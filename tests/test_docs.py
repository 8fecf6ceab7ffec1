"""Every ```python block in README.md and docs/ runs; the docs changelog is current; every
public name is on a generated API page (a ``::: module`` directive) with a docstring; the
built site fetches nothing from elsewhere, colours code with Pygments and shows no class
internals on its API pages; docs/cli.md documents every option of the parser; README
names the commands and features people look for."""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import shlex
import subprocess
import sys
import textwrap
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import griffe
import pytest
import yaml

import storeprobe
from storeprobe.cli_parser import build_parser

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for number, match in enumerate(BLOCK.finditer(page.read_text()), start=1):
            found.append((f"{page.relative_to(ROOT)}#{number}", match[1]))
    return found


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[where for where, _ in _blocks()])
def test_doc_block_runs(
    where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, where, "exec"), {"__name__": "__doc_example__"})


def test_docs_have_python_examples() -> None:
    assert len(_blocks()) >= 3


def test_docs_changelog_is_the_changelog() -> None:
    assert (ROOT / "docs" / "changelog.md").read_text() == (ROOT / "CHANGELOG.md").read_text()


# ::: storeprobe.module, then its options indented by four spaces (mkdocstrings)
DIRECTIVE = re.compile(r"^::: (?P<path>[\w.]+)[ ]*\n(?P<options>(?:[ ]{4}.*\n?)*)", re.MULTILINE)
# the modules users import directly, besides the package itself
IMPORTED_DIRECTLY = {
    "backends",
    "backup",
    "comparison",
    "dataset",
    "delta",
    "distributed",
    "metadata",
    "notices",
    "planning",
    "plot",
    "render",
    "request",
    "stats",
    "step",
    "timeline",
}


def _directives() -> dict[str, list[str] | None]:
    """Each ``:::`` identifier on a docs page, with its ``members`` option (None: all)."""
    found: dict[str, list[str] | None] = {}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for match in DIRECTIVE.finditer(page.read_text()):
            options = (yaml.safe_load(textwrap.dedent(match["options"])) or {}).get("options", {})
            found[match["path"]] = options.get("members")
    return found


def _api() -> griffe.Object | griffe.Alias:
    # griffe_sphinx: `#:` comments document attributes, as on the built pages
    extensions = griffe.load_extensions("griffe_sphinx")
    return griffe.load("storeprobe", search_paths=[ROOT], extensions=extensions)


def _final(obj: griffe.Object | griffe.Alias) -> griffe.Object | griffe.Alias:
    return obj.final_target if obj.is_alias else obj


def _rendered(
    api: griffe.Object | griffe.Alias, directive: str, members: list[str] | None
) -> set[str]:
    """The paths of what ``::: directive`` renders: the object, and its public members
    (filters: public renders a module's ``__all__``, re-exported names too)."""
    obj = api if directive == "storeprobe" else api[directive.removeprefix("storeprobe.")]
    if directive == "storeprobe":  # the package page renders only the members it lists
        names = members or []
    elif members is not None:
        names = members
    else:
        exports = obj.exports if obj.is_module else None
        names = (
            [str(name) for name in exports]
            if exports
            else [name for name in obj.members if not name.startswith("_")]
        )
    return {obj.path} | {_final(obj[name]).path for name in names}


def test_every_public_name_is_on_an_api_page() -> None:
    api, directives = _api(), _directives()
    rendered = set().union(*(_rendered(api, path, members) for path, members in directives.items()))
    missing = [name for name in storeprobe.__all__ if _final(api[name]).path not in rendered]
    assert not missing, f"public names on no API page (add a ::: directive): {missing}"
    assert {f"storeprobe.{module}" for module in IMPORTED_DIRECTLY} <= set(directives)


def test_every_public_name_has_a_docstring() -> None:
    api = _api()
    api_page = (ROOT / "docs" / "api.md").read_text()
    undocumented = []
    for name in storeprobe.__all__:
        target = _final(api[name])
        # a name without a docstring of its own is described in words on api.md
        if (
            not (target.docstring and target.docstring.value.strip())
            and f"`storeprobe.{name}`" not in api_page
        ):
            undocumented.append(name)
    assert not undocumented, f"public names without a docstring: {undocumented}"


# -- the built site ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``mkdocs build --strict`` writes it (mkdocs.yml, from this checkout).
    Not ``--quiet``: mkdocs 1.6 then drops warnings before strict mode counts them."""
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    return out


class _Fetched(HTMLParser):
    """What a page makes the browser fetch: script src, link href (stylesheets, icons,
    preloads, fonts), img/iframe/source src; anchors are not fetched."""

    FETCHING: ClassVar[dict[str, str]] = {
        "script": "src",
        "link": "href",
        "img": "src",
        "iframe": "src",
        "source": "src",
    }

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = self.FETCHING.get(tag)
        self.urls += [value for name, value in attrs if name == wanted and value]


REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)


def test_the_site_fetches_nothing_from_elsewhere(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 40
    remote = {}
    for page in pages:
        parser = _Fetched()
        parser.feed(page.read_text())
        found = [url for url in parser.urls if REMOTE.match(url)]
        if found:
            remote[str(page.relative_to(site))] = found
    assert not remote, f"pages that fetch from another host (a CDN): {remote}"
    # no stylesheet pulls a font or another stylesheet from elsewhere
    for sheet in site.rglob("*.css"):
        text = sheet.read_text()
        assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", text), sheet
        assert not re.search(r"@import\s+(?:url\()?\s*['\"]?(?:https?:)?//", text), sheet


def test_code_is_coloured_at_build_time(site: Path) -> None:
    index = (site / "index.html").read_text()
    assert "hljs" not in index  # highlight.js is off: nothing colours code in the browser
    # Pygments' token classes in a python block (pymdownx.highlight), and their rules
    assert '<div class="language-python highlight"><pre>' in index
    assert '<span class="kn">import</span>' in index
    assert 'href="css/pygments.css"' in index
    css = (site / "css" / "pygments.css").read_text()
    assert ".highlight .kn {" in css
    assert ".highlight .s2 {" in css  # strings


def test_navigation_is_four_groups(site: Path) -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    assert [next(iter(entry)) for entry in nav] == ["Guide", "How-to", "Reference", "API"]
    # the top bar of a built page holds those four menus and no other entry
    index = (site / "index.html").read_text()
    bar = index.split('<ul class="nav navbar-nav">', 1)[1]
    bar = bar.split('<ul class="nav navbar-nav ms-md-auto">', 1)[0]
    menus = re.findall(r'<a href="#" class="nav-link dropdown-toggle[^"]*"[^>]*>([^<]+)</a>', bar)
    assert menus == ["Guide", "How-to", "Reference", "API"]


API_PAGES = [
    "api",
    *(f"reference/{page.stem}" for page in sorted((ROOT / "docs" / "reference").glob("*.md"))),
]


@pytest.mark.parametrize("page", API_PAGES)
def test_api_page_shows_no_internals(site: Path, page: str) -> None:
    html = (site / page / "index.html").read_text()
    # no special member of a class has a heading (a module's __version__ may)
    special = re.findall(r'id="(storeprobe\.[\w.]*[A-Z]\w*\.__\w+__)"', html)
    assert not special, special
    assert "__init__" not in html
    assert "__attrs" not in html
    text = unescape(re.sub(r"<[^>]+>", "", html))
    # an attrs field shows its default, never the field(...) call that declares it
    assert not re.search(r"= (?:attrs\.)?field\(", text), page
    assert not re.search(r"= _\w+\(", text), page  # nor a private helper making one
    assert "Factory(" not in text, page  # nor attrs.Factory(...)


def test_attrs_fields_show_their_defaults(site: Path) -> None:
    text = unescape(re.sub(r"<[^>]+>", "", (site / "reference/workload/index.html").read_text()))
    assert "seed: int | None = None" in text  # field(default=None, validator=...)
    assert re.search(r"^count: int\s*$", text, re.MULTILINE)  # required: no value
    result = unescape(re.sub(r"<[^>]+>", "", (site / "reference/result/index.html").read_text()))
    assert "requests_by_kind: dict[str, int] = dict()" in result  # field(factory=dict)


# -- docs/cli.md against the parser -------------------------------------------------------

CLI_PAGE = ROOT / "docs" / "cli.md"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def _synopsis(name: str) -> str:
    """The lines of ``storeprobe NAME`` in the synopsis block that opens cli.md."""
    block = CLI_PAGE.read_text().split("```text\n", 1)[1].split("```", 1)[0]
    commands = re.split(r"^(?=storeprobe )", block, flags=re.MULTILINE)
    (lines,) = (command for command in commands if command.startswith(f"storeprobe {name} "))
    return lines


def _section(name: str) -> str:
    """The text of cli.md under ``## NAME``, up to the next heading of that level."""
    page = CLI_PAGE.read_text()
    return page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]


def _options(sub: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in sub._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def test_cli_page_lists_every_subcommand() -> None:
    page = CLI_PAGE.read_text()
    for name in _subcommands():
        assert f"\n## {name}\n" in page, f"docs/cli.md has no section '## {name}'"
        assert _synopsis(name)
    assert "`--help`" in page
    assert "storeprobe --version" in page


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_cli_page_documents_every_option(name: str) -> None:
    """Each option of ``storeprobe NAME``: in the synopsis, described (by one of its
    spellings, in backticks) in the command's section, every spelling on the page, and
    each of its choices on the page; each positional argument in the synopsis."""
    sub = _subcommands()[name]
    synopsis, section, page = _synopsis(name), _section(name), CLI_PAGE.read_text()
    prose = re.sub(r"^```.*?^```", "", page, flags=re.DOTALL | re.MULTILINE)
    code = " ".join(re.findall(r"`([^`]+)`", prose))  # what the page spells in code

    def mentioned(option: str, text: str) -> bool:
        return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None

    problems = []
    for action in _options(sub):
        spellings = action.option_strings
        if not any(mentioned(option, synopsis) for option in spellings):
            problems.append(f"{spellings[-1]} not in the synopsis of 'storeprobe {name}'")
        if not any(re.search(rf"`{re.escape(option)}[ =`]", section) for option in spellings):
            problems.append(f"{spellings[-1]} not described under '## {name}'")
        problems += [f"{o} not on the page" for o in spellings if not mentioned(o, page)]
        for choice in action.choices or ():
            if not (mentioned(str(choice), synopsis) or mentioned(str(choice), code)):
                problems.append(f"{spellings[-1]} {choice} not on the page")
    for action in sub._actions:
        metavar = str(action.metavar)
        if not action.option_strings and action.metavar and not mentioned(metavar, synopsis):
            problems.append(f"argument {metavar} not in the synopsis of 'storeprobe {name}'")
    assert not problems, problems


def test_ci_docs_build_fails_on_warnings() -> None:
    """.ci/run builds the docs strictly and neither quiet nor verbose: in mkdocs 1.6
    ``--quiet`` drops warnings before strict mode counts them (mkdocs/mkdocs#4126) and
    ``--verbose`` skips the anchor checks (mkdocs/mkdocs#3991)."""
    (line,) = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "mkdocs build" in line
    ]
    flags = line.split()
    assert "--strict" in flags
    assert not {"-q", "--quiet", "-v", "--verbose"} & set(flags), line


def _attrs_inits() -> list[tuple[str, griffe.Function]]:
    """Each class's ``__init__`` that docs/griffe_attrs.py wrote from the attrs fields."""
    extensions = griffe.load_extensions("griffe_sphinx", "docs/griffe_attrs.py:AttrsClasses")
    api = griffe.load("storeprobe", search_paths=[ROOT], extensions=extensions)
    found: list[tuple[str, griffe.Function]] = []

    def walk(obj: griffe.Object) -> None:
        for member in obj.members.values():
            if member.is_alias or not (member.is_module or member.is_class):
                continue
            init = member.members.get("__init__") if member.is_class else None
            if isinstance(init, griffe.Function) and init.extra["griffe_attrs"]:
                found.append((member.path, init))
            walk(member)  # type: ignore[arg-type]

    walk(api)  # type: ignore[arg-type]
    return found


def test_attrs_signatures_on_the_api_pages_are_the_real_ones() -> None:
    """The signature the API pages give each attrs class: the parameters of the class
    attrs built (names, order, kinds, which have a default), read with inspect."""
    inits = _attrs_inits()
    assert len(inits) >= 90  # every attrs class of the package (99 when written)
    wrong = {}
    for path, init in inits:
        module_path, _, name = path.rpartition(".")
        while True:  # a nested class: Outer.Inner
            try:
                owner: object = importlib.import_module(module_path)
                break
            except ModuleNotFoundError:
                module_path, _, outer = module_path.rpartition(".")
                name = f"{outer}.{name}"
        for part in name.split("."):
            owner = getattr(owner, part)
        real = [
            (p.name, p.kind.name, p.default is not inspect.Parameter.empty)
            for p in inspect.signature(owner).parameters.values()  # type: ignore[arg-type]
        ]
        kinds = {"positional or keyword": "POSITIONAL_OR_KEYWORD", "keyword-only": "KEYWORD_ONLY"}
        shown = [
            (p.name, kinds[p.kind.value], p.default is not None)
            for p in init.parameters
            if p.name != "self"
        ]
        if shown != real:
            wrong[path] = (shown, real)
    assert not wrong, wrong


# -- commands shown in README.md and docs/ --------------------------------------------------

SHELL_BLOCK = re.compile(r"^```(bash|sh|shell|console|text)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _commands() -> list[tuple[str, list[str]]]:
    """Each ``storeprobe ...`` command of a shell block (or a ``$ storeprobe`` line of a
    text block), continuation lines joined, cut at a pipe, redirection or ``&&``."""
    found = []
    for page in PAGES:
        for kind, block in SHELL_BLOCK.findall(page.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.strip()
                if kind == "text" and not line.startswith("$ storeprobe "):
                    continue
                line = line.removeprefix("$ ")
                if not line.startswith("storeprobe "):
                    continue
                words = shlex.split(line, comments=True)
                for stop in ("|", "&&", ";", ">", "2>"):
                    words = words[: words.index(stop)] if stop in words else words
                found.append((f"{page.relative_to(ROOT)}: {line[:60]}", words[1:]))
    return found


def test_docs_show_storeprobe_commands() -> None:
    assert len(_commands()) >= 15


@pytest.mark.parametrize(("where", "argv"), _commands(), ids=[where for where, _ in _commands()])
def test_doc_command_parses(where: str, argv: list[str]) -> None:
    """A command the docs show is one the CLI accepts: its subcommand and options exist
    (parsed, not run; argparse exits 2 naming an unknown option)."""
    args = build_parser().parse_args(argv)
    assert args.command == argv[0]


def test_readme_names_what_people_look_for() -> None:
    """README says, with a command each: compare, sweep, the HTML report, the pytest
    plugin, named targets (an rclone remote, storeprobe.toml)."""
    readme = (ROOT / "README.md").read_text()
    commands = [" ".join(argv) for _, argv in _commands()]
    for needed in ("compare ", "sweep ", "report "):
        assert any(command.startswith(needed) for command in commands), needed
    assert any(command.startswith("report ") and "--html" in command for command in commands)
    assert "--storeprobe-compare" in readme  # the pytest plugin, with its gate
    assert re.search(r"^storeprobe run \w+:[\w/]+", readme, re.MULTILINE)  # an rclone remote
    assert "storeprobe.toml" in readme
