"""Text on its way out, fitted to where it goes: one sanitiser per sink.

- `terminal`: what the console shows of a name the user or a task controls (a folder, a model,
  an image, a task file): every control character (C0, DEL, C1), every bidirectional override
  and every lone surrogate is shown escaped (`\\x1b`, `\\u202e`), so no escape sequence acts, no
  line is forged and nothing fails to encode. A task's output and a model's text, which are long
  and coloured, go through `kernels.jupyter.output.console_text` instead (sequences removed).
- `xml`: a value written into JUnit XML (an attribute or text): the characters XML 1.0 does not
  allow are shown as `#xNN`, as pytest's junitxml shows them in the names it escapes itself;
  `xml_tree` applies it to every attribute and text of an element (the plugin, to every test
  case of the JUnit report pytest is about to write).
- `html`: a page of the HTML report: a lone surrogate (which UTF-8 cannot encode) becomes U+FFFD.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

#: what a terminal must not receive raw: controls but tab and newline in multi-line text, the
#: bidirectional marks and overrides (text that reads other than it runs), lone surrogates
_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_TERMINAL_UNSAFE_IN_A_LINE = re.compile(f"[\t\n{_TERMINAL_UNSAFE.pattern[1:-1]}]")
#: what XML 1.0 does not allow (its Char production), and DEL, as pytest's junitxml escapes it
_XML_ILLEGAL = re.compile("[^\t\n\r\x20-\x7e\x80-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal(text: str, *, multiline: bool = False) -> str:
    """`text` safe to print on the user's terminal: unsafe characters shown as `\\xNN` or
    `\\uNNNN`; tabs and newlines too unless `multiline` (one line stays one line)."""
    pattern = _TERMINAL_UNSAFE if multiline else _TERMINAL_UNSAFE_IN_A_LINE
    return pattern.sub(_escaped, text)


def _xml_escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"#x{code:02X}" if code <= 0xFF else f"#x{code:04X}"


def xml(text: str) -> str:
    """`text` as XML 1.0 allows it in an attribute or text: illegal characters as `#xNN`."""
    return _XML_ILLEGAL.sub(_xml_escaped, text)


def html(text: str) -> str:
    """A page's text as UTF-8 can encode it: each lone surrogate as U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def xml_tree(element: ET.Element) -> None:
    """Every attribute, text and tail of `element` and its descendants through `xml`."""
    for node in element.iter():
        node.attrib = {xml(str(k)): xml(str(v)) for k, v in node.attrib.items()}
        if node.text:
            node.text = xml(node.text)
        if node.tail:
            node.tail = xml(node.tail)
