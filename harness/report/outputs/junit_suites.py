"""One JUnit ``<testsuite>`` per suite file: pytest's junitxml writes every case into one
testsuite named "pytest", while CI viewers group by testsuite. `split_by_file` rewrites
the file a run wrote, moving each ``<testcase>`` (with its properties and output)
unchanged into the testsuite of the file it came from, and recounting each."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.store.atomic import write_bytes_atomic

# A testcase's outcome element -> the testsuite counter it adds to.
_COUNTERS = {"failure": "failures", "error": "errors", "skipped": "skipped"}
# The testsuite attributes every split suite keeps from pytest's one.
_KEPT = ("timestamp", "hostname")


def suite_file(classname: str, rootdir: Path) -> str:
    """The file (relative to ``rootdir``) a testcase's dotted ``classname`` names: the
    longest leading part that is a ``.py`` file there (a test class follows it); the
    classname itself when none is."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if (rootdir / candidate).is_file():
            return candidate
    return classname


def _suite(name: str, template: ET.Element, cases: list[ET.Element]) -> ET.Element:
    suite = ET.Element("testsuite", {"name": name})
    for attribute in _KEPT:
        if attribute in template.attrib:
            suite.set(attribute, template.attrib[attribute])
    counts = dict.fromkeys(_COUNTERS.values(), 0)
    for case in cases:
        for tag, counter in _COUNTERS.items():
            if case.find(tag) is not None:
                counts[counter] += 1
                break
    suite.set("tests", str(len(cases)))
    for counter, value in counts.items():
        suite.set(counter, str(value))
    suite.set("time", f"{sum(float(c.get('time', 0) or 0) for c in cases):.3f}")
    properties = template.find("properties")
    if properties is not None:  # the session's own properties belong to every suite
        suite.append(properties)
    suite.extend(cases)
    return suite


def split_by_file(junit: Path, rootdir: Path) -> int:
    """Rewrite ``junit`` with one testsuite per test file, in first-seen order; returns
    how many testsuites it now holds. A file whose root is not pytest's single testsuite
    (already split, or not pytest's) is left as it is (0)."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    if len(suites) != 1 or suites[0].tag != "testsuite":
        return 0
    template = suites[0]
    grouped: dict[str, list[ET.Element]] = {}
    for case in template.findall("testcase"):
        grouped.setdefault(suite_file(case.get("classname", ""), rootdir), []).append(case)
    out = ET.Element("testsuites")
    for name, cases in grouped.items():
        out.append(_suite(name, template, cases))
    for counter in ("tests", *_COUNTERS.values()):
        out.set(counter, str(sum(int(s.get(counter, "0")) for s in out)))
    out.set("time", template.get("time", "0"))
    write_bytes_atomic(junit, ET.tostring(out, encoding="utf-8", xml_declaration=True))
    return len(grouped)
