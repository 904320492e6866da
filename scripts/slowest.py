#!/usr/bin/env python3
"""Prints the slowest tests of cargo-nextest's JUnit reports: slowest.py COUNT REPORT.xml..."""
import sys
import xml.etree.ElementTree as ElementTree

count, reports = int(sys.argv[1]), sys.argv[2:]
times = []
for report in reports:
    try:
        root = ElementTree.parse(report).getroot()
    except (OSError, ElementTree.ParseError) as error:
        print(f"slowest: cannot read {report}: {error}", file=sys.stderr)
        continue
    for case in root.iter("testcase"):
        times.append((float(case.get("time", "0")), f"{case.get('classname')} {case.get('name')}"))
for seconds, name in sorted(times, reverse=True)[:count]:
    print(f"{seconds:9.1f} s  {name}")
